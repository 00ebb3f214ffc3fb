//! The model: sequences placed onto the 64-entry table, the worst-case cycle and latency
//! arithmetic, and admission and release on it (the method is described in the module above).

use super::*;
use serde::{Deserialize, Serialize};

/// What a request needs, before it is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Entries of its sequence: 64 / its effective distance.
    pub entries: u32,
    /// The distance its latency (or its own `distance`) asks for.
    pub distance: u32,
    /// Credits per entry: whole frames.
    pub share: u32,
    /// Credits per cycle its bandwidth needs (before rounding to whole frames).
    pub credits: u64,
    /// Its largest frame.
    pub frame: u32,
}

impl Plan {
    /// The distance between its entries.
    pub fn effective_distance(&self) -> u32 {
        ENTRIES / self.entries
    }
}

/// A sequence: `entries` entries exactly 64 / `entries` apart, one VL, the connections sharing
/// them (each entry's weight is the sum of their shares).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sequence {
    /// Entries in the sequence, a power of two up to 64 (64 / distance).
    pub entries: u32,
    /// The VL every entry serves; one VL per sequence size.
    pub vl: u8,
    /// The connections sharing the entries, in the order they were admitted.
    pub members: Vec<Request>,
}

/// One entry of the high-priority table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    /// The VL it serves (0 when free).
    pub vl: u8,
    /// Credits of 64 bytes per visit: its members' shares summed (at most 255; 0 when free).
    pub weight: u32,
    /// The largest frame of the connections it serves (0 when free).
    pub max_frame: u32,
    /// Index of its sequence in [`Admission::sequences`].
    pub sequence: Option<usize>,
}

/// An admitted connection, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The request as admitted.
    pub request: Request,
    /// What it needed.
    pub plan: Plan,
    /// The VL its sequence serves.
    pub vl: u8,
    /// Its entries, ascending.
    pub entries: Vec<u32>,
    /// Its latency bound with the table as it is now, in ns.
    pub latency_now_ns: u64,
    /// Its latency bound whatever is admitted later (every other entry full), in ns.
    pub latency_guaranteed_ns: u64,
    /// The rate it is sure of on the table as it is, bits per second.
    pub rate_floor_bps: u64,
}

/// The state file: the port and the sequences in the order they were made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// [`STATE_VERSION`] when written; another is refused on reading.
    pub version: u32,
    /// The port the table is for.
    pub port: PortParams,
    /// The sequences in the order they were made: their placement order.
    pub sequences: Vec<Sequence>,
}

/// The state's format version.
pub const STATE_VERSION: u32 = 1;

/// The admitted connections of one port and the table they make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    params: PortParams,
    sequences: Vec<Sequence>,
    /// Where each sequence sits (its j), kept equal to `place(sequences)`.
    starts: Vec<u32>,
}

/// Each sequence's starting entry, placing them in order on an empty table (first free
/// candidate set in bit-reversal order); `None` if one does not fit.
fn place(sequences: &[Sequence]) -> Option<Vec<u32>> {
    let mut used = 0u64;
    let mut out = Vec::with_capacity(sequences.len());
    for s in sequences {
        let d = ENTRIES / s.entries;
        let j = candidate_order(d).into_iter().find(|&j| used & mask(d, j) == 0)?;
        used |= mask(d, j);
        out.push(j);
    }
    Some(out)
}

fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b.max(1))
}

impl Admission {
    /// An empty table for `params`.
    pub fn new(params: PortParams) -> Result<Admission, String> {
        params.check()?;
        Ok(Admission {
            params,
            sequences: Vec::new(),
            starts: Vec::new(),
        })
    }

    /// From a state file's content, checked: every member re-planned under the port, sizes,
    /// VLs, weights and names consistent. Errors name the sequence and member.
    pub fn from_state(state: State) -> Result<Admission, String> {
        if state.version != STATE_VERSION {
            return Err(format!(
                "version: {} (this rocectl reads version {STATE_VERSION})",
                state.version
            ));
        }
        let mut a = Admission::new(state.port).map_err(|e| format!("port: {e}"))?;
        let mut names: Vec<&str> = Vec::new();
        for (i, s) in state.sequences.iter().enumerate() {
            let at = |e: String| format!("sequences[{i}]: {e}");
            if s.members.is_empty() {
                return Err(at("no members".into()));
            }
            if let Some(m) = s
                .members
                .iter()
                .find(|m| m.latency_ns.is_some() == m.distance.is_some())
            {
                return Err(at(format!("{}: give latency_ns or distance (one of them)", m.name)));
            }
            if !s.entries.is_power_of_two() || s.entries > ENTRIES {
                return Err(at(format!("entries: {} is not a power of two up to 64", s.entries)));
            }
            if state.sequences[..i]
                .iter()
                .any(|o| (o.vl == s.vl) != (o.entries == s.entries))
            {
                return Err(at(format!(
                    "vl {}: one VL per sequence size (another sequence disagrees)",
                    s.vl
                )));
            }
            if !a.params.vls.contains(&s.vl) {
                return Err(at(format!(
                    "vl: {} is not among the port's VLs {:?}",
                    s.vl, a.params.vls
                )));
            }
            let mut weight = 0u32;
            for m in &s.members {
                let plan = a.plan(m).map_err(|e| at(format!("{}: {e}", m.name)))?;
                if plan.entries != s.entries {
                    return Err(at(format!(
                        "{}: needs a {}-entry sequence, not {}",
                        m.name, plan.entries, s.entries
                    )));
                }
                if m.vl.is_some_and(|v| v != s.vl) {
                    return Err(at(format!(
                        "{}: asks for VL {:?}, sequence is on {}",
                        m.name, m.vl, s.vl
                    )));
                }
                if names.contains(&m.name.as_str()) {
                    return Err(at(format!("{}: name given twice", m.name)));
                }
                names.push(&m.name);
                weight = weight.saturating_add(plan.share);
            }
            if weight > MAX_WEIGHT {
                return Err(at(format!("weight per entry {weight} is above {MAX_WEIGHT}")));
            }
        }
        let starts = place(&state.sequences).ok_or("sequences: more entries than the table has")?;
        a.sequences = state.sequences;
        a.starts = starts;
        Ok(a)
    }

    /// The state to write back.
    pub fn state(&self) -> State {
        State {
            version: STATE_VERSION,
            port: self.params.clone(),
            sequences: self.sequences.clone(),
        }
    }

    /// The port the table is for.
    pub fn params(&self) -> &PortParams {
        &self.params
    }

    /// The sequences, in the order they were made (their placement order).
    pub fn sequences(&self) -> &[Sequence] {
        &self.sequences
    }

    /// Where sequence `i` starts (its j).
    pub fn start(&self, i: usize) -> u32 {
        self.starts[i]
    }

    /// Entries used by all sequences.
    pub fn used_entries(&self) -> u32 {
        self.sequences.iter().map(|s| s.entries).sum()
    }

    /// Entries no sequence uses: a request for that many or fewer fits (see the module doc).
    pub fn free_entries(&self) -> u32 {
        ENTRIES - self.used_entries()
    }

    fn share_sum(&self, s: &Sequence) -> u32 {
        s.members
            .iter()
            .fold(0, |w, m| w.saturating_add(self.plan(m).map_or(0, |p| p.share)))
    }

    fn frame_of(&self, r: &Request) -> u32 {
        r.frame.unwrap_or(self.params.max_frame)
    }

    /// The 64 entries.
    pub fn table(&self) -> Vec<Entry> {
        let mut t = vec![Entry::default(); ENTRIES as usize];
        for (i, (s, &j)) in self.sequences.iter().zip(&self.starts).enumerate() {
            let weight = self.share_sum(s);
            let max_frame = s.members.iter().map(|m| self.frame_of(m)).max().unwrap_or(0);
            for k in entry_set(ENTRIES / s.entries, j) {
                t[k as usize] = Entry {
                    vl: s.vl,
                    weight,
                    max_frame,
                    sequence: Some(i),
                };
            }
        }
        t
    }

    /// The high-priority table as `[VL, weight]` pairs in table order, free entries as
    /// `[0, 0]` (weight 0 is skipped), all 64 so every position and the wrap-around stay.
    pub fn high_pairs(&self) -> Vec<[u32; 2]> {
        self.table()
            .iter()
            .map(|e| {
                if e.weight == 0 {
                    [0, 0]
                } else {
                    [u32::from(e.vl), e.weight]
                }
            })
            .collect()
    }

    fn line(&self, bytes: u64) -> u64 {
        ceil_div(u128::from(bytes) * 8 * 1_000_000_000, u128::from(self.params.speed_bps)) as u64
    }

    /// Low-priority frames that can go among `high_bytes` of high-priority line time made of at
    /// most `high_frames` frames.
    fn lows(&self, high_bytes: u64, high_frames: u64) -> u64 {
        match self.params.high_limit {
            UNBOUNDED_LIMIT => 0,
            0 => high_frames + 1,
            q => high_bytes / (LIMIT_UNIT_BYTES * u64::from(q)) + 1,
        }
    }

    /// Line bytes and frames of one visit of an entry at its worst: its weight plus an overdraw
    /// of one of its largest frames, every frame with its wire overhead.
    fn visit(&self, weight: u32, max_frame: u32) -> (u64, u64) {
        if weight == 0 {
            return (0, 0);
        }
        let frames = (u64::from(weight) * CREDIT_BYTES).div_ceil(u64::from(self.params.min_frame));
        (
            u64::from(weight) * CREDIT_BYTES + u64::from(max_frame) + frames * WIRE_OVERHEAD_BYTES,
            frames,
        )
    }

    /// Line bytes from a frame's arrival to its departure, given the visits in between and
    /// its own entry's visit: a frame in transmission, those visits, the low frames let in.
    fn window(&self, visits: impl Iterator<Item = (u32, u32)>) -> u64 {
        let big = u64::from(self.params.max_frame) + WIRE_OVERHEAD_BYTES;
        let (mut bytes, mut frames) = (big, 1);
        for (w, f) in visits {
            let (b, n) = self.visit(w, f);
            bytes += b;
            frames += n;
        }
        bytes + self.lows(bytes, frames) * big
    }

    /// The worst cycle of a full table (64 entries of weight 255, largest frames) in line
    /// bytes: what the rate mapping takes the whole link to be.
    pub fn full_cycle_line_bytes(&self) -> u64 {
        self.window((0..ENTRIES).map(|_| (MAX_WEIGHT, self.params.max_frame)))
    }

    /// Credits per table cycle a rate needs (bits of frames per second).
    pub fn credits_per_cycle(&self, bw_bps: u64) -> u64 {
        ceil_div(
            u128::from(bw_bps) * u128::from(self.full_cycle_line_bytes()) * 8,
            u128::from(self.params.speed_bps) * u128::from(CREDIT_BYTES) * 8,
        ) as u64
    }

    /// The latency bound of distance `distance` (entries `distance` apart) whatever the rest
    /// of the table holds, ns.
    pub fn guaranteed_bound_ns(&self, distance: u32) -> u64 {
        let f = self.params.max_frame;
        self.line(self.window((0..distance).map(|_| (MAX_WEIGHT, f))))
    }

    /// What `req` needs, or why it cannot be had on this port at all (entries and VLs aside).
    pub fn plan(&self, req: &Request) -> Result<Plan, Refusal> {
        if req.bw_bps == 0 {
            return Err(Refusal::ZeroBandwidth);
        }
        if req.bw_bps > self.params.speed_bps {
            return Err(Refusal::AboveLink {
                bw_bps: req.bw_bps,
                speed_bps: self.params.speed_bps,
            });
        }
        let frame = self.frame_of(req);
        if !(self.params.min_frame..=self.params.max_frame).contains(&frame) {
            return Err(Refusal::FrameSize {
                frame,
                min_frame: self.params.min_frame,
                max_frame: self.params.max_frame,
            });
        }
        let distance = match (req.distance, req.latency_ns) {
            (Some(d), _) => {
                if !(d.is_power_of_two() && (2..=ENTRIES).contains(&d)) {
                    return Err(Refusal::BadDistance(d));
                }
                d
            }
            (None, Some(lat)) => {
                let mut d = ENTRIES;
                while self.guaranteed_bound_ns(d) > lat {
                    if d == 2 {
                        return Err(Refusal::LatencyTooLow {
                            asked_ns: lat,
                            best_ns: self.guaranteed_bound_ns(2),
                        });
                    }
                    d /= 2;
                }
                d
            }
            (None, None) => return Err(Refusal::BadDistance(0)),
        };
        let credits = self.credits_per_cycle(req.bw_bps);
        let p = u64::from(frame).div_ceil(CREDIT_BYTES);
        let mut entries = ENTRIES / distance;
        loop {
            let share = credits.div_ceil(u64::from(entries) * p).max(1) * p;
            if share <= u64::from(MAX_WEIGHT) {
                return Ok(Plan {
                    entries,
                    distance,
                    share: share as u32,
                    credits,
                    frame,
                });
            }
            if entries == ENTRIES {
                let frames = u64::from(MAX_WEIGHT) / p * u64::from(ENTRIES);
                let max = ceil_div(
                    u128::from(frames * p * CREDIT_BYTES) * u128::from(self.params.speed_bps),
                    u128::from(self.full_cycle_line_bytes()),
                );
                return Err(Refusal::AboveTable {
                    credits,
                    max_bps: max.min(u128::from(u64::MAX)) as u64,
                });
            }
            entries *= 2;
        }
    }

    /// Admits `req`: joins the first sequence of its size with weight left, else makes a new
    /// one on the first free candidate set. Returns the index of its sequence.
    pub fn admit(&mut self, req: Request) -> Result<usize, Refusal> {
        if self.connection_index(&req.name).is_some() {
            return Err(Refusal::DuplicateName(req.name));
        }
        let plan = self.plan(&req)?;
        let vl = self.vl_for(&req, plan.entries)?;
        if let Some(i) = self
            .sequences
            .iter()
            .position(|s| s.entries == plan.entries && self.share_sum(s) + plan.share <= MAX_WEIGHT)
        {
            self.sequences[i].members.push(req);
            return Ok(i);
        }
        if self.free_entries() < plan.entries {
            return Err(Refusal::NotEnoughEntries {
                need: plan.entries,
                free: self.free_entries(),
                distance: plan.effective_distance(),
            });
        }
        self.sequences.push(Sequence {
            entries: plan.entries,
            vl,
            members: vec![req],
        });
        match place(&self.sequences) {
            Some(starts) => {
                self.starts = starts;
                Ok(self.sequences.len() - 1)
            }
            None => {
                // Cannot happen (see the module doc); refused rather than trusted.
                let s = self.sequences.pop().expect("just pushed");
                Err(Refusal::NotEnoughEntries {
                    need: s.entries,
                    free: self.free_entries(),
                    distance: ENTRIES / s.entries,
                })
            }
        }
    }

    fn vl_for(&self, req: &Request, entries: u32) -> Result<u8, Refusal> {
        let allowed = &self.params.vls;
        let own = self.sequences.iter().find(|s| s.entries == entries).map(|s| s.vl);
        if let Some(vl) = req.vl {
            if !allowed.contains(&vl) {
                return Err(Refusal::VlNotAllowed {
                    vl,
                    allowed: allowed.clone(),
                });
            }
            if let Some(own) = own.filter(|o| *o != vl) {
                return Err(Refusal::VlTaken {
                    vl,
                    detail: format!("is not the VL of {entries}-entry sequences (VL {own})"),
                });
            }
            if let Some(other) = self.sequences.iter().find(|s| s.vl == vl && s.entries != entries) {
                return Err(Refusal::VlTaken {
                    vl,
                    detail: format!(
                        "serves {}-entry sequences; this request needs {entries} entries",
                        other.entries
                    ),
                });
            }
            return Ok(vl);
        }
        if let Some(own) = own {
            return Ok(own);
        }
        allowed
            .iter()
            .copied()
            .find(|v| self.sequences.iter().all(|s| s.vl != *v))
            .ok_or(Refusal::NoFreeVl {
                entries,
                allowed: allowed.clone(),
            })
    }

    fn connection_index(&self, name: &str) -> Option<(usize, usize)> {
        self.sequences
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.members.iter().position(|m| m.name == name).map(|k| (i, k)))
    }

    /// Releases a connection; its sequence goes when empty, and every sequence is placed again
    /// (defragmented).
    pub fn release(&mut self, name: &str) -> Result<(), Refusal> {
        let (i, k) = self
            .connection_index(name)
            .ok_or_else(|| Refusal::UnknownName(name.to_string()))?;
        self.sequences[i].members.remove(k);
        if self.sequences[i].members.is_empty() {
            self.sequences.remove(i);
        }
        // Placing a prefix-closed list on an empty table always fits (module doc).
        self.starts = place(&self.sequences).unwrap_or_default();
        Ok(())
    }

    /// The latency bound of connection `name` on the table as it is, ns.
    pub fn latency_bound_ns(&self, name: &str) -> Option<u64> {
        let (i, _) = self.connection_index(name)?;
        let table = self.table();
        let s = &self.sequences[i];
        let d = ENTRIES / s.entries;
        let j = self.starts[i];
        let at = |k: u32| {
            let e = table[(k % ENTRIES) as usize];
            (e.weight, e.max_frame)
        };
        entry_set(d, j)
            .map(|start| self.line(self.window((start + 1..=start + d).map(at))))
            .max()
    }

    /// The rate connection `name` is sure of on the table as it is: its credits per cycle over
    /// the table's worst cycle, bits per second.
    pub fn rate_floor_bps(&self, name: &str) -> Option<u64> {
        let (i, _) = self.connection_index(name)?;
        let s = &self.sequences[i];
        let share = self.plan(&s.members[self.connection_index(name)?.1]).ok()?.share;
        let cycle = self.window(self.table().iter().map(|e| (e.weight, e.max_frame)));
        let bits =
            u128::from(s.entries) * u128::from(share) * u128::from(CREDIT_BYTES) * u128::from(self.params.speed_bps);
        Some((bits / u128::from(cycle.max(1))).min(u128::from(u64::MAX)) as u64)
    }

    /// Every admitted connection with its place and bounds, in admission-list order.
    pub fn connections(&self) -> Vec<Connection> {
        let mut out = Vec::new();
        for (i, s) in self.sequences.iter().enumerate() {
            let d = ENTRIES / s.entries;
            for m in &s.members {
                let Ok(plan) = self.plan(m) else { continue };
                out.push(Connection {
                    request: m.clone(),
                    plan,
                    vl: s.vl,
                    entries: entry_set(d, self.starts[i]).collect(),
                    latency_now_ns: self.latency_bound_ns(&m.name).unwrap_or(0),
                    latency_guaranteed_ns: self.guaranteed_bound_ns(d),
                    rate_floor_bps: self.rate_floor_bps(&m.name).unwrap_or(0),
                });
            }
        }
        out
    }
}
