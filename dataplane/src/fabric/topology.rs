//! The topology file: hosts, switches (each with its own config), links, routes, the NIC
//! model's settings and the traffic. Read from TOML, then checked whole into a [`Topology`]
//! whose names are resolved to indices, so the event loop never looks anything up by name.
//! Every error names the entry and the field that causes it.

use crate::nic::sender::DcqcnOverrides;
use anyhow::{anyhow, bail, Context, Result};
use controlplane::units;
use controlplane::Config;
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// Signal speed in a cable: 5 ns per metre (as the headroom calculation assumes).
pub const NS_PER_M: f64 = 5.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Virtual time to run.
    duration: Option<String>,
    #[serde(default)]
    nic: NicFile,
    #[serde(default, rename = "switch")]
    switches: Vec<SwitchFile>,
    #[serde(default, rename = "host")]
    hosts: Vec<HostFile>,
    #[serde(default, rename = "link")]
    links: Vec<LinkFile>,
    #[serde(default, rename = "route")]
    routes: Vec<RouteFile>,
    #[serde(default, rename = "traffic")]
    traffic: Vec<TrafficFile>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NicFile {
    mtu: Option<usize>,
    dscp: Option<u8>,
    pfc: Option<bool>,
    dcqcn: Option<bool>,
    cnp_interval: Option<String>,
    message: Option<String>,
    dcqcn_byte_counter: Option<String>,
    dcqcn_rai: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchFile {
    name: String,
    config: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostFile {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkFile {
    a: String,
    b: String,
    speed: Option<String>,
    cable: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteFile {
    switch: String,
    to: String,
    ports: Vec<u16>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrafficFile {
    pattern: String,
    #[serde(default)]
    from: Vec<String>,
    #[serde(default)]
    to: Vec<String>,
    size: Option<String>,
    start: Option<String>,
}

/// One end of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum End {
    Host(usize),
    /// (switch index, port index in its config).
    Switch(usize, usize),
}

#[derive(Debug, Clone)]
pub struct Link {
    pub name: String,
    pub a: End,
    pub b: End,
    pub speed_bps: u64,
    pub cable_m: f64,
}

impl Link {
    pub fn delay_ns(&self) -> u64 {
        (self.cable_m * NS_PER_M).round() as u64
    }
}

#[derive(Debug, Clone)]
pub struct SwitchSpec {
    pub name: String,
    pub config: Config,
    /// Per port index: the link on it, if any.
    pub links: Vec<Option<usize>>,
    /// Per destination host: the port indices a frame for it may leave by (ECMP group).
    pub routes: Vec<Vec<usize>>,
}

#[derive(Debug, Clone)]
pub struct HostSpec {
    pub name: String,
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    pub link: usize,
}

/// What a flow sends: a number of bytes (one message), or for as long as the run lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowSize {
    Bytes(u64),
    Long,
}

#[derive(Debug, Clone)]
pub struct FlowSpec {
    pub pattern: String,
    pub src: usize,
    pub dst: usize,
    pub size: FlowSize,
    pub start_ns: u64,
}

/// The NIC model's settings, the same for every host.
#[derive(Debug, Clone)]
pub struct NicSpec {
    pub mtu: usize,
    pub dscp: u8,
    pub pfc: bool,
    pub dcqcn: bool,
    pub cnp_interval_ns: u64,
    /// Message size of long flows (they send one message after another).
    pub long_message: u64,
    pub dcqcn_overrides: DcqcnOverrides,
}

#[derive(Debug, Clone)]
pub struct Topology {
    pub duration_ns: u64,
    pub nic: NicSpec,
    pub switches: Vec<SwitchSpec>,
    pub hosts: Vec<HostSpec>,
    pub links: Vec<Link>,
    pub flows: Vec<FlowSpec>,
}

/// The MAC a host gets: locally administered, numbered.
pub fn host_mac(i: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, (i >> 8) as u8, i as u8]
}

/// The IPv4 address a host gets: 10.0.x.y, numbered from 10.0.0.1.
pub fn host_ip(i: usize) -> [u8; 4] {
    let n = i + 1;
    [10, 0, (n >> 8) as u8, n as u8]
}

/// The next-hop MAC of a switch's port: the fabric routes a frame by rewriting its destination
/// MAC to this, and the switch's static FDB entry sends it out of that port (see mod.rs).
pub fn port_mac(switch: usize, port: usize) -> [u8; 6] {
    [
        0x06,
        0xfa,
        (switch >> 8) as u8,
        switch as u8,
        (port >> 8) as u8,
        port as u8,
    ]
}

fn dur(s: &str, what: &str) -> Result<u64> {
    units::parse_duration(s).map_err(|e| anyhow!("{what}: {e}"))
}

/// Reads and checks a topology file. Switch configs are read relative to the file's folder;
/// a switch without `config` gets `default_config`.
pub fn load(path: &Path, default_config: &Path, seed: u64) -> Result<Topology> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read topology {}", path.display()))?;
    let file: File = toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    build(file, dir, default_config, seed).map_err(|e| anyhow!("{}: {e:#}", path.display()))
}

/// As [`load`], from text (tests).
pub fn from_str(text: &str, dir: &Path, default_config: &Path, seed: u64) -> Result<Topology> {
    let file: File = toml::from_str(text)?;
    build(file, dir, default_config, seed)
}

fn build(file: File, dir: &Path, default_config: &Path, seed: u64) -> Result<Topology> {
    let duration_ns = dur(file.duration.as_deref().unwrap_or("1ms"), "duration")?;
    if duration_ns == 0 {
        bail!("duration must be positive");
    }
    let n = &file.nic;
    let mtu = n.mtu.unwrap_or(1024);
    if ![256, 512, 1024, 2048, 4096].contains(&mtu) {
        bail!("nic.mtu must be 256, 512, 1024, 2048 or 4096 (got {mtu})");
    }
    let dscp = n.dscp.unwrap_or(26);
    if dscp > 63 {
        bail!("nic.dscp must be 0..=63 (got {dscp})");
    }
    let long_message = match &n.message {
        Some(s) => units::parse_size(s).map_err(|e| anyhow!("nic.message: {e}"))?,
        None => 64 << 10,
    };
    if long_message == 0 || long_message > u64::from(u32::MAX) {
        bail!("nic.message must be 1 B ..= 4 GiB");
    }
    let mut dcqcn_overrides = DcqcnOverrides::default();
    if let Some(s) = &n.dcqcn_byte_counter {
        dcqcn_overrides.byte_counter = Some(units::parse_size(s).map_err(|e| anyhow!("nic.dcqcn_byte_counter: {e}"))?);
    }
    if let Some(s) = &n.dcqcn_rai {
        dcqcn_overrides.rai_bps = Some(units::parse_rate(s).map_err(|e| anyhow!("nic.dcqcn_rai: {e}"))? as f64);
    }
    let nic = NicSpec {
        mtu,
        dscp,
        pfc: n.pfc.unwrap_or(true),
        dcqcn: n.dcqcn.unwrap_or(true),
        cnp_interval_ns: dur(n.cnp_interval.as_deref().unwrap_or("50us"), "nic.cnp_interval")?,
        long_message,
        dcqcn_overrides,
    };

    // Names: one namespace for hosts and switches, so a link end is never ambiguous.
    let mut names: BTreeMap<&str, End> = BTreeMap::new();
    if file.switches.is_empty() {
        bail!("no [[switch]]: a fabric needs at least one");
    }
    let mut switches = Vec::new();
    for (i, s) in file.switches.iter().enumerate() {
        check_name(&s.name, "switch")?;
        if names.insert(&s.name, End::Switch(i, 0)).is_some() {
            bail!("switch {:?}: the name is used twice", s.name);
        }
        let cfg_path = s
            .config
            .as_ref()
            .map_or_else(|| default_config.to_path_buf(), |p| dir.join(p));
        let loaded = controlplane::load_file(&cfg_path)
            .map_err(|e| anyhow!("switch {:?}: config {}: {e}", s.name, cfg_path.display()))?;
        let nports = loaded.config.ports.len();
        switches.push(SwitchSpec {
            name: s.name.clone(),
            config: loaded.config,
            links: vec![None; nports],
            routes: Vec::new(),
        });
    }
    let mut hosts = Vec::new();
    for (i, h) in file.hosts.iter().enumerate() {
        check_name(&h.name, "host")?;
        if names.insert(&h.name, End::Host(i)).is_some() {
            bail!("host {:?}: the name is used twice (by a host or a switch)", h.name);
        }
        hosts.push(HostSpec {
            name: h.name.clone(),
            mac: host_mac(i),
            ip: host_ip(i),
            link: usize::MAX,
        });
    }
    if hosts.len() < 2 {
        bail!("a fabric needs at least two [[host]]s");
    }

    let mut links: Vec<Link> = Vec::new();
    for (li, l) in file.links.iter().enumerate() {
        let what = format!("link {} ({} – {})", li + 1, l.a, l.b);
        let a = resolve_end(&l.a, &names, &switches).with_context(|| format!("{what}: a"))?;
        let b = resolve_end(&l.b, &names, &switches).with_context(|| format!("{what}: b"))?;
        if a == b {
            bail!("{what}: both ends are the same");
        }
        if let (End::Host(_), End::Host(_)) = (a, b) {
            bail!("{what}: a link joins a host to a switch, or two switches; not two hosts");
        }
        // Speed and cable: a switch port's config says them; a link may repeat them but not
        // contradict them, since the switch's headroom and pacing come from its config.
        let mut speed: Option<u64> = match &l.speed {
            Some(s) => Some(units::parse_rate(s).map_err(|e| anyhow!("{what}: speed: {e}"))?),
            None => None,
        };
        let mut cable: Option<f64> = match &l.cable {
            Some(s) => Some(units::parse_length(s).map_err(|e| anyhow!("{what}: cable: {e}"))?),
            None => None,
        };
        for end in [a, b] {
            match end {
                End::Switch(s, p) => {
                    let sw = &mut switches[s];
                    if let Some(other) = sw.links[p] {
                        bail!(
                            "{what}: port {} of switch {:?} is already used by link {}",
                            sw.config.ports[p].id,
                            sw.name,
                            other + 1
                        );
                    }
                    sw.links[p] = Some(li);
                    let port = &sw.config.ports[p];
                    match speed {
                        Some(v) if v != port.speed_bps => bail!(
                            "{what}: speed {} b/s, but port {} of switch {:?} runs at {} b/s (its config decides)",
                            v,
                            port.id,
                            sw.name,
                            port.speed_bps
                        ),
                        _ => speed = Some(port.speed_bps),
                    }
                    cable = Some(cable.unwrap_or(port.cable_m));
                }
                End::Host(h) => {
                    if hosts[h].link != usize::MAX {
                        bail!(
                            "{what}: host {:?} already has a link (link {}); hosts have one NIC port",
                            hosts[h].name,
                            hosts[h].link + 1
                        );
                    }
                    hosts[h].link = li;
                }
            }
        }
        links.push(Link {
            name: format!("{}-{}", l.a, l.b),
            a,
            b,
            speed_bps: speed.expect("a link has a switch end"),
            cable_m: cable.unwrap_or(0.0),
        });
    }
    for h in &hosts {
        if h.link == usize::MAX {
            bail!(
                "host {:?} has no link: connect it to a switch port with a [[link]]",
                h.name
            );
        }
    }

    // Routes: every shortest path by default (ECMP over them), then explicit [[route]]s.
    for s in 0..switches.len() {
        let r = shortest_routes(s, &switches, &hosts, &links);
        switches[s].routes = r;
    }
    for (i, r) in file.routes.iter().enumerate() {
        let what = format!("route {} (switch {:?} to {:?})", i + 1, r.switch, r.to);
        let s = match names.get(r.switch.as_str()) {
            Some(End::Switch(s, _)) => *s,
            _ => bail!("{what}: no switch named {:?}", r.switch),
        };
        let h = match names.get(r.to.as_str()) {
            Some(End::Host(h)) => *h,
            _ => bail!("{what}: `to` must name a host; there is no host {:?}", r.to),
        };
        if r.ports.is_empty() {
            bail!("{what}: ports is empty");
        }
        let mut ports = Vec::new();
        for id in &r.ports {
            let sw = &switches[s];
            let p = sw
                .config
                .ports
                .iter()
                .position(|p| p.id == *id)
                .ok_or_else(|| anyhow!("{what}: switch {:?} has no port {id}", sw.name))?;
            if sw.links[p].is_none() {
                bail!("{what}: port {id} of switch {:?} has no link", sw.name);
            }
            ports.push(p);
        }
        switches[s].routes[h] = ports;
    }

    let mut flows = Vec::new();
    let mut rng = crate::egress::rng::Rng::new(seed ^ 0x5eed_fab1);
    let host_idx = |name: &str, what: &str| -> Result<usize> {
        match names.get(name) {
            Some(End::Host(h)) => Ok(*h),
            Some(End::Switch(..)) => bail!("{what}: {name:?} is a switch, not a host"),
            None => bail!("{what}: no host named {name:?}"),
        }
    };
    for (i, t) in file.traffic.iter().enumerate() {
        let what = format!("traffic {} ({})", i + 1, t.pattern);
        let start_ns = dur(t.start.as_deref().unwrap_or("0s"), &format!("{what}: start"))?;
        let size = match &t.size {
            Some(s) if s == "long" => FlowSize::Long,
            Some(s) => {
                let b = units::parse_size(s).map_err(|e| anyhow!("{what}: size: {e}"))?;
                if b == 0 || b > u64::from(u32::MAX) {
                    bail!("{what}: size must be 1 B ..= 4 GiB, or \"long\"");
                }
                FlowSize::Bytes(b)
            }
            None => FlowSize::Long,
        };
        let from: Vec<usize> = t.from.iter().map(|n| host_idx(n, &what)).collect::<Result<_>>()?;
        let to: Vec<usize> = t.to.iter().map(|n| host_idx(n, &what)).collect::<Result<_>>()?;
        let mut push = |src: usize, dst: usize| {
            flows.push(FlowSpec {
                pattern: t.pattern.clone(),
                src,
                dst,
                size,
                start_ns,
            })
        };
        match t.pattern.as_str() {
            // N→1: every `from` host (default: every host but the target) to the one `to`.
            "incast" => {
                let [dst] = to[..] else {
                    bail!("{what}: incast needs exactly one host in `to`")
                };
                let srcs: Vec<usize> = if from.is_empty() {
                    (0..hosts.len()).filter(|&h| h != dst).collect()
                } else {
                    from
                };
                for s in srcs {
                    if s == dst {
                        bail!("{what}: {:?} is both a sender and the target", hosts[s].name);
                    }
                    push(s, dst);
                }
            }
            // A random derangement (seeded) of the listed hosts (default: all): each sends to
            // one other and receives from one other.
            "permutation" => {
                if !to.is_empty() {
                    bail!("{what}: a permutation takes `from` only (its hosts send to each other)");
                }
                let set: Vec<usize> = if from.is_empty() {
                    (0..hosts.len()).collect()
                } else {
                    from
                };
                if set.len() < 2 {
                    bail!("{what}: a permutation needs at least two hosts");
                }
                // Sattolo's algorithm: a uniformly random single cycle, so no host maps to itself.
                let mut perm = set.clone();
                for k in (1..perm.len()).rev() {
                    let j = (rng.next_u64() % k as u64) as usize;
                    perm.swap(k, j);
                }
                for (s, d) in set.iter().zip(&perm) {
                    push(*s, *d);
                }
            }
            // Explicit flows: every `from` to every `to`.
            "flows" => {
                if from.is_empty() || to.is_empty() {
                    bail!("{what}: flows needs `from` and `to`");
                }
                for &s in &from {
                    for &d in &to {
                        if s == d {
                            bail!("{what}: {:?} would send to itself", hosts[s].name);
                        }
                        push(s, d);
                    }
                }
            }
            other => bail!("{what}: unknown pattern {other:?} (incast, permutation, flows)"),
        }
    }
    if flows.is_empty() {
        bail!("no traffic: add a [[traffic]] (incast, permutation or flows)");
    }
    for f in &flows {
        check_reachable(f.src, f.dst, &switches, &hosts, &links)?;
    }
    Ok(Topology {
        duration_ns,
        nic,
        switches,
        hosts,
        links,
        flows,
    })
}

fn check_name(name: &str, kind: &str) -> Result<()> {
    if name.is_empty() || name.contains(':') || name.contains(char::is_whitespace) {
        bail!("{kind} name {name:?}: must be non-empty, without ':' or spaces");
    }
    Ok(())
}

/// `"h0"` (a host) or `"leaf0:3"` (port id 3 of switch leaf0).
fn resolve_end(s: &str, names: &BTreeMap<&str, End>, switches: &[SwitchSpec]) -> Result<End> {
    let (name, port) = match s.split_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (s, None),
    };
    match names.get(name) {
        None => bail!("no host or switch named {name:?}"),
        Some(End::Host(h)) => match port {
            None => Ok(End::Host(*h)),
            Some(_) => bail!("{name:?} is a host: name it without a port"),
        },
        Some(End::Switch(sw, _)) => {
            let Some(p) = port else {
                bail!("{name:?} is a switch: say which port, as {name}:PORT")
            };
            let id: u16 = p.parse().map_err(|_| anyhow!("{s:?}: {p:?} is not a port id"))?;
            let cfg = &switches[*sw].config;
            let idx = cfg.ports.iter().position(|q| q.id == id).ok_or_else(|| {
                let ids: Vec<String> = cfg.ports.iter().map(|q| q.id.to_string()).collect();
                anyhow!(
                    "switch {name:?} has no port {id} (its config has ports {})",
                    ids.join(", ")
                )
            })?;
            Ok(End::Switch(*sw, idx))
        }
    }
}

fn other_end(l: &Link, me: End) -> End {
    if l.a == me {
        l.b
    } else {
        l.a
    }
}

/// For switch `s`, per host: every port on a shortest path (in switch hops) to that host.
fn shortest_routes(s: usize, switches: &[SwitchSpec], hosts: &[HostSpec], links: &[Link]) -> Vec<Vec<usize>> {
    // Distance from every switch to each host, by BFS from the host's switch.
    let mut routes = vec![Vec::new(); hosts.len()];
    for (h, host) in hosts.iter().enumerate() {
        let dist = switch_distances(End::Host(h), host.link, switches, links);
        for (p, link) in switches[s].links.iter().enumerate() {
            let Some(li) = *link else { continue };
            let next = other_end(&links[li], End::Switch(s, p));
            let ok = match next {
                End::Host(x) => x == h,
                End::Switch(t, _) => dist[t].is_some_and(|d| dist[s].is_some_and(|ds| d + 1 == ds)),
            };
            if ok {
                routes[h].push(p);
            }
        }
    }
    routes
}

/// Hops from each switch to the host on `host_link` (0 for its own switch).
fn switch_distances(host: End, host_link: usize, switches: &[SwitchSpec], links: &[Link]) -> Vec<Option<u32>> {
    let mut dist = vec![None; switches.len()];
    let mut q = VecDeque::new();
    if let End::Switch(s, _) = other_end(&links[host_link], host) {
        dist[s] = Some(0);
        q.push_back(s);
    }
    while let Some(s) = q.pop_front() {
        let d = dist[s].expect("queued with a distance");
        for (p, link) in switches[s].links.iter().enumerate() {
            let Some(li) = *link else { continue };
            if let End::Switch(t, _) = other_end(&links[li], End::Switch(s, p)) {
                if dist[t].is_none() {
                    dist[t] = Some(d + 1);
                    q.push_back(t);
                }
            }
        }
    }
    dist
}

/// Follows the routes (every ECMP choice) from `src` to `dst`: each must arrive, without a
/// loop, or the error names where it stops.
fn check_reachable(src: usize, dst: usize, switches: &[SwitchSpec], hosts: &[HostSpec], links: &[Link]) -> Result<()> {
    let start = other_end(&links[hosts[src].link], End::Host(src));
    let mut stack = vec![(start, 0usize)];
    while let Some((end, hops)) = stack.pop() {
        let End::Switch(s, _) = end else {
            if end == End::Host(dst) {
                continue;
            }
            bail!(
                "no route from {:?} to {:?}: a route leads to another host",
                hosts[src].name,
                hosts[dst].name
            );
        };
        if hops > switches.len() {
            bail!(
                "no route from {:?} to {:?}: the routes loop (at switch {:?})",
                hosts[src].name,
                hosts[dst].name,
                switches[s].name
            );
        }
        let ports = &switches[s].routes[dst];
        if ports.is_empty() {
            bail!(
                "no route from {:?} to {:?}: switch {:?} has none (the hosts are not connected, or a [[route]] is missing)",
                hosts[src].name,
                hosts[dst].name,
                switches[s].name
            );
        }
        for &p in ports {
            let li = switches[s].links[p].expect("routes use linked ports");
            stack.push((other_end(&links[li], End::Switch(s, p)), hops + 1));
        }
    }
    Ok(())
}
