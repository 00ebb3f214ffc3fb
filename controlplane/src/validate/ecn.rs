//! `[ecn.NAME]`: the WRED-ECN profiles queues refer to by name.

use super::ctx::Ctx;
use super::defaults::*;
use crate::model::*;
use crate::schema::*;
use std::collections::BTreeMap;

pub(super) fn resolve_ecn(cx: &mut Ctx, map: &BTreeMap<String, EcnSection>) -> BTreeMap<String, EcnProfile> {
    let mut out = BTreeMap::new();
    for (name, s) in map {
        let path = format!("ecn.{name}");
        let kmin = cx.size(&format!("{path}.kmin"), &s.kmin);
        let kmax = cx.size(&format!("{path}.kmax"), &s.kmax);
        if let (Some(lo), Some(hi)) = (kmin, kmax) {
            if lo > hi {
                cx.error(format!("{path}.kmin ({}) is above kmax ({})", s.kmin, s.kmax));
            }
        }
        if kmax == Some(0) {
            cx.error(format!("{path}.kmax ({}) must be above 0", s.kmax));
        }
        let pmax = cx.real(&format!("{path}.pmax"), &s.pmax);
        if let Some(p) = pmax {
            if p > 1.0 {
                cx.error(format!("{path}.pmax ({}) must be from 0 to 1", s.pmax));
            }
        }
        let ewma = s
            .ewma_shift
            .and_then(|n| cx.int_in(&format!("{path}.ewma_shift"), n, 0, MAX_EWMA_SHIFT))
            .and_then(|n| u8::try_from(n).ok());
        let average = s
            .average
            .as_deref()
            .and_then(|a| cx.word(&format!("{path}.average"), a, &[("instant", false), ("ewma", true)]));
        match (average, s.ewma_shift) {
            (Some(false), Some(_)) => cx.error(format!("{path}.ewma_shift: given but {path}.average is \"instant\"")),
            (Some(true), None) => cx.error(format!(
                "{path}.average: \"ewma\" needs {path}.ewma_shift (weight 2^-shift)"
            )),
            _ => {}
        }
        let mark_at = s
            .mark_at
            .as_deref()
            .and_then(|m| {
                cx.word(
                    &format!("{path}.mark_at"),
                    m,
                    &[("dequeue", MarkPoint::Dequeue), ("enqueue", MarkPoint::Enqueue)],
                )
            })
            .unwrap_or(MarkPoint::Dequeue);
        let non_ect = s
            .non_ect
            .as_deref()
            .and_then(|m| {
                cx.word(
                    &format!("{path}.non_ect"),
                    m,
                    &[("pass", NonEct::Pass), ("drop", NonEct::Drop)],
                )
            })
            .unwrap_or(NonEct::Pass);
        out.insert(
            name.clone(),
            EcnProfile {
                name: name.clone(),
                kmin_bytes: kmin.unwrap_or(0),
                kmax_bytes: kmax.unwrap_or(0),
                pmax: pmax.unwrap_or(0.0),
                ewma_shift: ewma,
                mark_at,
                non_ect,
            },
        );
    }
    out
}
