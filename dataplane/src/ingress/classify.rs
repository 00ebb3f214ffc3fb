//! Classification: which traffic class, egress queue and ingress PG a frame belongs to.
//!
//! Order: the CNP fast lane first (a CNP must never wait behind data, whatever its DSCP; a CNP
//! is BTH opcode 0x81 in a CNP-sized frame, `FrameInfo::is_cnp_sized`: a larger frame with
//! that opcode is not one, and is classified as the ordinary traffic of its DSCP), then
//! the trust map (DSCP, PCP or nothing) of the receiving port's map set (`[[port]] classify`,
//! SONiC's per-port PORT_QOS_MAP bindings; `[classify]`'s own by default), then the ordered
//! rules, first match wins (the UCloud edge policy: `udp_dport == 4791 && dscp == 48 → queue 6`, else rewrite DSCP to a default).

use crate::wire::FrameInfo;
use controlplane::{Config, Rule, Trust, NUM_TC};

/// The outcome for one frame.
///
/// Plain bytes, no `Option`: the receive path passes a class around for every frame, and an
/// `Option<u8>` field was written as two bytes and read back as one 16-bit word, a
/// store-forwarding stall per frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// Traffic class, which is also the PFC priority.
    pub tc: u8,
    /// Egress queue (0..8).
    pub queue: u8,
    /// Ingress PG (0..8) whose account admits it.
    pub pg: u8,
    /// Whether it took the CNP fast lane (a CNP-sized frame with opcode 0x81).
    pub cnp: bool,
    /// DSCP to write into the frame ([`Class::set_dscp`]), [`Class::KEEP_DSCP`] for none.
    pub rewrite_dscp: u8,
}

impl Class {
    /// `rewrite_dscp` when the frame keeps its DSCP (a DSCP is 6 bits, so never this).
    pub const KEEP_DSCP: u8 = u8::MAX;

    /// A placeholder for a frame not classified (yet): class 0, nothing rewritten.
    pub const UNCLASSIFIED: Class = Class {
        tc: 0,
        queue: 0,
        pg: 0,
        cnp: false,
        rewrite_dscp: Class::KEEP_DSCP,
    };

    /// DSCP to write into the frame, when a rule rewrites it and it differs.
    #[inline]
    pub fn set_dscp(&self) -> Option<u8> {
        (self.rewrite_dscp != Self::KEEP_DSCP).then_some(self.rewrite_dscp)
    }
}

/// One port's ingress maps (its map set, or `[classify]`'s), with the switch's trust: what
/// the trusted field of a frame received there means.
#[derive(Debug, Clone)]
pub struct PortMaps {
    trust: Trust,
    default_tc: u8,
    dscp_to_tc: [u8; 64],
    pcp_to_tc: [u8; 8],
    tc_to_pg: [u8; NUM_TC],
}

impl PortMaps {
    /// The maps of map set `set` (`[classify]`'s own for `None`), with the switch's trust.
    pub(crate) fn new(cfg: &Config, set: Option<usize>) -> Self {
        let c = &cfg.classify;
        let m = c.maps(set);
        PortMaps {
            trust: c.trust,
            default_tc: c.default_tc,
            dscp_to_tc: *m.dscp_to_tc,
            pcp_to_tc: *m.pcp_to_tc,
            tc_to_pg: *m.tc_to_pg,
        }
    }

    /// The traffic class (= PFC priority) from the trusted field alone. A peer uses this to
    /// decide which of its frames a PFC pause holds, as a NIC configured to match the port it
    /// sends into would.
    #[inline]
    pub fn trusted_tc(&self, info: &FrameInfo) -> u8 {
        match self.trust {
            Trust::Dscp => info
                .dscp()
                .map_or(self.default_tc, |d| self.dscp_to_tc[d as usize & 63]),
            Trust::Pcp => info.pcp().map_or(self.default_tc, |p| self.pcp_to_tc[p as usize & 7]),
            Trust::None => self.default_tc,
        }
    }
}

/// The config's classification that every port shares: the queue map, the rules and the CNP
/// queue. Each port's own maps ([`PortMaps`]) live in its ingress port
/// (`ingress::port::IngressPort::maps`), copied there at configuration time, so that a frame
/// finds them in the port it was already working on (bench/instructions.sh: a set index and
/// then the set cost 598 instructions a frame at 64 B, a per-port table here 589, the port's
/// own copy 575).
#[derive(Debug, Clone)]
pub struct Classifier {
    /// `[classify]`'s own maps, for an index that is not a port.
    pub(crate) default: PortMaps,
    tc_to_queue: [u8; NUM_TC],
    rules: Vec<Rule>,
    cnp_queue: u8,
}

impl Classifier {
    /// Tables from the config's `[classify]` and the CNP queue of `[cnp]`.
    pub fn new(cfg: &Config) -> Self {
        let c = &cfg.classify;
        Classifier {
            default: PortMaps::new(cfg, None),
            tc_to_queue: c.tc_to_queue,
            rules: c.rules.clone(),
            cnp_queue: cfg.cnp.queue,
        }
    }

    /// Inlined into the receive path, the rules (rare, and a loop) out of line.
    /// `frame_len`: the frame's length (without FCS), which tells a CNP from a frame that
    /// only carries its opcode.
    /// `maps`: the receiving port's maps; `in_port`: its config id (what a rule's `in_port`
    /// matches).
    #[inline(always)]
    pub fn classify(&self, info: &FrameInfo, maps: &PortMaps, in_port: u16, frame_len: usize) -> Class {
        let tc = maps.trusted_tc(info);
        let cnp = info.is_cnp_sized(frame_len);
        let mut class = Class {
            tc,
            queue: self.tc_to_queue[tc as usize & 7],
            pg: maps.tc_to_pg[tc as usize & 7],
            cnp,
            rewrite_dscp: Class::KEEP_DSCP,
        };
        if cnp {
            class.queue = self.cnp_queue;
            return class;
        }
        if !self.rules.is_empty() {
            // Not a CNP here (a CNP returned above): a rule's `cnp = true` matches none.
            self.apply_rules(&mut class, info, maps, in_port);
        }
        class
    }

    /// The first rule that matches, applied to `class`.
    #[inline(never)]
    fn apply_rules(&self, class: &mut Class, info: &FrameInfo, maps: &PortMaps, in_port: u16) {
        if let Some(rule) = self.rules.iter().find(|r| matches(r, info, in_port)) {
            if let Some(tc) = rule.action.tc {
                class.tc = tc;
                class.queue = self.tc_to_queue[tc as usize & 7];
                class.pg = maps.tc_to_pg[tc as usize & 7];
            }
            if let Some(q) = rule.action.queue {
                class.queue = q;
            }
            if let Some(d) = rule.action.set_dscp {
                if info.dscp().is_some_and(|cur| cur != d) {
                    class.rewrite_dscp = d & 63;
                }
            }
        }
    }
}

#[inline]
fn matches(rule: &Rule, info: &FrameInfo, in_port: u16) -> bool {
    let m = &rule.matches;
    fn ok<T: PartialEq>(want: Option<T>, have: Option<T>) -> bool {
        want.is_none() || want == have
    }
    ok(m.in_port, Some(in_port))
        && ok(m.ether_type, Some(info.ether_type()))
        && ok(m.ip_proto, info.ip_proto())
        && ok(m.udp_dport, info.udp_dport())
        && ok(m.udp_sport, info.udp_sport())
        && ok(m.dscp, info.dscp())
        && ok(m.pcp, info.pcp())
        && ok(m.roce, Some(info.is_roce()))
        && ok(m.cnp, Some(false))
}
