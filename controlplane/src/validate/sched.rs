//! `scheduler` (in `[port_defaults]` and each `[[port]]`): which kind of scheduler each port
//! runs, and that kind's own settings. A port's key overrides the default's.

use super::ctx::Ctx;
use crate::model::*;
use crate::schema::*;

/// The kinds `scheduler = "..."` accepts.
const KINDS: &[(&str, Kind)] = &[("sp_wdrr", Kind::SpWdrr)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    SpWdrr,
}

/// Each port's scheduler, in `file.ports` order.
pub(super) fn resolve_schedulers(cx: &mut Ctx, file: &ConfigFile) -> Vec<SchedulerConfig> {
    let default = file
        .port_defaults
        .scheduler
        .as_deref()
        .and_then(|w| cx.word("port_defaults.scheduler", w, KINDS));
    file.ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let kind = match p.scheduler.as_deref() {
                Some(w) => cx.word(&format!("port[{i}].scheduler"), w, KINDS),
                None => default,
            };
            match kind.unwrap_or(Kind::SpWdrr) {
                Kind::SpWdrr => SchedulerConfig::SpWdrr,
            }
        })
        .collect()
}
