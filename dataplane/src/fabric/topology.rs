//! The topology file: hosts, switches (each with its own config), links, routes, the NIC
//! model's settings and the traffic. Read from TOML, then checked whole into a [`Topology`]
//! whose names are resolved to indices, so the event loop never looks anything up by name.
//! Every error names the entry and the field that causes it.

use crate::nic::sender::DcqcnOverrides;
use anyhow::{anyhow, bail, Context, Result};
use controlplane::units;
use controlplane::validate::MAX_CABLE_M;
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
    traffic: Vec<TrafficSpec>,
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
    ports: Vec<PortRef>,
}

/// A switch port in a topology: its id (`3`) or its name in the switch's config (`"Ethernet0"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PortRef {
    Id(u16),
    Name(String),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Id(id) => write!(f, "{id}"),
            PortRef::Name(n) => write!(f, "{n}"),
        }
    }
}

/// One `[[traffic]]` entry as written: a pattern over hosts (by name) and what each pair
/// sends. Public so that `rocesw tune` can put its own traffic on a topology
/// ([`Topology::with_traffic`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficSpec {
    /// `incast`, `all-to-all`, `permutation` or `flows`: who sends to whom.
    pub pattern: String,
    /// Sending hosts by name; empty means the pattern's default (usually every host).
    #[serde(default)]
    pub from: Vec<String>,
    /// Receiving hosts by name (an incast takes exactly one); empty means the pattern's default.
    #[serde(default)]
    pub to: Vec<String>,
    /// One message of this size per pair, or `"long"`.
    pub size: Option<String>,
    /// When the flows start, a duration such as `"10us"` (default 0).
    pub start: Option<String>,
    /// Message sizes as an empirical distribution, `[[bytes, weight], ...]`: each source then
    /// sends a Poisson stream of messages (needs `load`) instead of one flow per pair.
    pub sizes: Option<Vec<(SizeValue, Number)>>,
    /// With `sizes`: each source's offered load, a fraction of its line rate (0 < load ≤ 1).
    pub load: Option<f64>,
    /// With `sizes`: no message starts after this (default: the run's duration).
    pub stop: Option<String>,
}

/// A size as TOML allows it: `65536` or `"64KiB"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    /// A plain number of bytes.
    Bytes(u64),
    /// A size with a unit, parsed by `units::parse_size`.
    Text(String),
}

impl SizeValue {
    fn bytes(&self) -> Result<u64> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => units::parse_size(t).map_err(|e| anyhow!("{e}")),
        }
    }
}

/// A weight as TOML allows it: `3` or `0.5`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
pub enum Number {
    /// An integer weight.
    Int(i64),
    /// A fractional weight.
    Float(f64),
}

impl Number {
    fn get(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// Messages a traffic entry may generate before it is refused: the event loop polls every
/// sender of a host in turn, so far more would make runs crawl rather than fail.
pub const MAX_MESSAGES: usize = 200_000;

/// One end of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum End {
    /// Index into [`Topology::hosts`].
    Host(usize),
    /// (switch index, port index in its config).
    Switch(usize, usize),
}

/// A full-duplex link between two ends; each direction serialises its own frames.
#[derive(Debug, Clone)]
pub struct Link {
    /// Its two ends as the topology writes them, joined by '-' (`h7-leaf1:3`).
    pub name: String,
    /// The same ends the other way round (`leaf1:3-h7`): `--pcap` takes either.
    pub reverse_name: String,
    /// The first end as written; frames from it travel in the link's forward direction.
    pub a: End,
    /// The second end as written.
    pub b: End,
    /// Line rate in bits per second, both ways.
    pub speed_bps: u64,
    /// Cable length in metres.
    pub cable_m: f64,
}

impl Link {
    /// Propagation delay of the cable in ns (5 ns/m), added after serialisation.
    pub fn delay_ns(&self) -> u64 {
        (self.cable_m * NS_PER_M).round() as u64
    }
}

/// One switch of the topology: its config and how its ports connect and route.
#[derive(Debug, Clone)]
pub struct SwitchSpec {
    /// The switch's name in the topology (the `switch` of an end such as `leaf1:3`).
    pub name: String,
    /// The parsed and validated config it runs with.
    pub config: Config,
    /// The config file's text: what a patch (`rocectl patch`, `rocesw tune`) is merged into.
    pub config_text: String,
    /// Where it was read from; `None` for the built-in default profile
    /// ([`controlplane::DEFAULT_PROFILE`]).
    pub config_path: Option<PathBuf>,
    /// Per port index: the link on it, if any.
    pub links: Vec<Option<usize>>,
    /// Per destination host: the port indices a frame for it may leave by (ECMP group).
    pub routes: Vec<Vec<usize>>,
}

/// One host: a NIC model on one link.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// The host's name in the topology.
    pub name: String,
    /// Its MAC, the source address of its frames.
    pub mac: [u8; 6],
    /// Its IPv4 address (flows are told apart and routed by it).
    pub ip: [u8; 4],
    /// Index into [`Topology::links`] of its one link.
    pub link: usize,
}

/// What a flow sends: a number of bytes (one message), or for as long as the run lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowSize {
    /// One message of this many bytes.
    Bytes(u64),
    /// Messages of `nic.message` bytes one after another until the run ends.
    Long,
}

/// One flow after the traffic patterns are expanded: a sender, a receiver and what it sends.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// The `[[traffic]]` pattern it came from (reports group by it).
    pub pattern: String,
    /// Sending host, index into [`Topology::hosts`].
    pub src: usize,
    /// Receiving host, index into [`Topology::hosts`].
    pub dst: usize,
    /// How much it sends.
    pub size: FlowSize,
    /// Virtual time it starts, ns.
    pub start_ns: u64,
}

/// The NIC model's settings, the same for every host.
#[derive(Debug, Clone)]
pub struct NicSpec {
    /// RoCE path MTU in bytes (256, 512, 1024, 2048 or 4096; default 1024).
    pub mtu: usize,
    /// DSCP of the data packets (0..=63; default 26), which the switch maps to a priority.
    pub dscp: u8,
    /// Whether NICs obey PFC frames (default on).
    pub pfc: bool,
    /// Whether senders run DCQCN rate control (default on).
    pub dcqcn: bool,
    /// Least time between two CNPs per flow at the receiver, ns (default 50 µs).
    pub cnp_interval_ns: u64,
    /// Message size of long flows (they send one message after another).
    pub long_message: u64,
    /// DCQCN parameters the topology sets instead of the model's defaults.
    pub dcqcn_overrides: DcqcnOverrides,
}

/// A whole fabric as `rocesw fabric` and `rocesw tune` run it, parsed and checked by [`load`].
#[derive(Debug, Clone)]
pub struct Topology {
    /// Virtual time to run, ns (default 1 ms).
    pub duration_ns: u64,
    /// NIC settings every host shares.
    pub nic: NicSpec,
    /// The switches, in file order.
    pub switches: Vec<SwitchSpec>,
    /// The hosts, in file order.
    pub hosts: Vec<HostSpec>,
    /// The links, in file order.
    pub links: Vec<Link>,
    /// The flows the traffic patterns expand to.
    pub flows: Vec<FlowSpec>,
    /// Per host: the mean rate (bits per second) the `sizes`/`load` traffic offers it, each
    /// source's load spread evenly over its destinations. What the arrivals realise varies
    /// with the seed; this does not, so it is what says whether a host's link is overloaded.
    pub offered_bps: Vec<f64>,
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

/// Two cable lengths are one when they differ by less than a micrometre (a length written in
/// km and in m need not give the same float).
fn same_length(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

fn dur(s: &str, what: &str) -> Result<u64> {
    units::parse_duration(s).map_err(|e| anyhow!("{what}: {e}"))
}

/// Reads and checks a topology file. Switch configs are read relative to the file's folder;
/// a switch without `config` gets `default_config`, or the built-in default profile
/// ([`controlplane::DEFAULT_PROFILE`]) when that is `None`.
pub fn load(path: &Path, default_config: Option<&Path>, seed: u64) -> Result<Topology> {
    let text = controlplane::files::read_text(path).map_err(|e| anyhow!("topology {e}"))?;
    let file: File = toml::from_str(&text).map_err(|e| match switch_config_not_topology(&text) {
        true => anyhow!(
            "{}: this is a switch config, not a topology (it has [[port]]s and no [[switch]]): \
             give it as a [[switch]]'s `config` in a topology file (such as examples/fabric/leaf-spine.toml), \
             or to `rocesw replay` / `rocesw run` with --config",
            path.display()
        ),
        false => anyhow!("{}: {e}", path.display()),
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    build(file, dir, default_config, seed).map_err(|e| anyhow!("{}: {e:#}", path.display()))
}

/// A file that loads as a switch config and has no `[[switch]]`: the config of one of the
/// switches, given where a topology goes (they sit side by side in examples/fabric/).
fn switch_config_not_topology(text: &str) -> bool {
    let has_switch = text.parse::<toml::Table>().is_ok_and(|t| t.contains_key("switch"));
    !has_switch && controlplane::load_str(text).is_ok_and(|l| !l.config.ports.is_empty())
}

/// As [`load`], from text (tests).
pub fn from_str(text: &str, dir: &Path, default_config: Option<&Path>, seed: u64) -> Result<Topology> {
    let file: File = toml::from_str(text)?;
    build(file, dir, default_config, seed)
}

fn build(file: File, dir: &Path, default_config: Option<&Path>, seed: u64) -> Result<Topology> {
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
        let cfg_path = match &s.config {
            Some(p) => Some(dir.join(p)),
            None => default_config.map(Path::to_path_buf),
        };
        let (config_text, cfg_name) = match &cfg_path {
            Some(p) => (
                controlplane::files::read_text(p).map_err(|e| anyhow!("switch {:?}: config {e}", s.name))?,
                p.display().to_string(),
            ),
            None => (
                controlplane::DEFAULT_PROFILE.to_string(),
                controlplane::DEFAULT_PROFILE_NAME.to_string(),
            ),
        };
        let loaded =
            controlplane::load_str(&config_text).map_err(|e| anyhow!("switch {:?}: config {cfg_name}: {e}", s.name))?;
        let nports = loaded.config.ports.len();
        switches.push(SwitchSpec {
            name: s.name.clone(),
            config: loaded.config,
            config_text,
            config_path: cfg_path,
            links: vec![None; nports],
            routes: Vec::new(),
        });
    }
    // In virtual time a switch touches its descriptors at start-up and its packet buffers as
    // frames arrive: the descriptors of every switch together must fit what the machine has.
    let need = switches
        .iter()
        .map(|s| controlplane::memory::footprint(&s.config).fixed_bytes)
        .fold(0, u64::saturating_add);
    if let Some(avail) = controlplane::memory::machine_available().filter(|&a| need > a) {
        bail!(
            "the {} switches need {} MiB at start-up together (their packet arenas' bookkeeping and \
             descriptors), above the {} MiB this machine has available: use fewer switches, or \
             configs with a smaller buffer.size or a larger buffer.cell",
            switches.len(),
            need >> 20,
            avail >> 20
        );
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
            Some(s) => {
                let m = units::parse_length(s).map_err(|e| anyhow!("{what}: cable: {e}"))?;
                if !(0.0..=MAX_CABLE_M).contains(&m) {
                    bail!(
                        "{what}: cable {s:?} must be from 0m to {} (as in a switch config)",
                        units::format_length(MAX_CABLE_M)
                    );
                }
                Some(m)
            }
            None => None,
        };
        // Who said the cable's length first: this link, or a port's config.
        let mut cable_from = l.cable.as_ref().map(|s| format!("the link says {s}"));
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
                    let here = format!(
                        "port {} of switch {:?} has {} in its config",
                        port.id,
                        sw.name,
                        units::format_length(port.cable_m)
                    );
                    match cable {
                        // One cable has one length; the switch's headroom is sized for its
                        // config's, so a longer link would lose lossless frames.
                        Some(c) if !same_length(c, port.cable_m) => bail!(
                            "{what}: cable: {}, but {here} (the configs decide; give the same length or none)",
                            cable_from.as_deref().unwrap_or_default()
                        ),
                        Some(_) => {}
                        None => {
                            cable = Some(port.cable_m);
                            cable_from = Some(here);
                        }
                    }
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
            reverse_name: format!("{}-{}", l.b, l.a),
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
            let p = port_index(&sw.config, &id.to_string())
                .ok_or_else(|| anyhow!("{what}: switch {:?} has no port {id}{}", sw.name, ports_of(&sw.config)))?;
            if sw.links[p].is_none() {
                bail!("{what}: port {id} of switch {:?} has no link", sw.name);
            }
            ports.push(p);
        }
        switches[s].routes[h] = ports;
    }

    let mut topo = Topology {
        duration_ns,
        nic,
        switches,
        hosts,
        links,
        flows: Vec::new(),
        offered_bps: Vec::new(),
    };
    (topo.flows, topo.offered_bps) = expand_traffic(&file.traffic, &topo, seed)?;
    Ok(topo)
}

impl Topology {
    /// What the switches touch at start-up together in virtual time
    /// ([`controlplane::memory::Footprint::fixed_bytes`]); their packet buffers fill as frames
    /// arrive.
    pub fn memory_bytes(&self) -> u64 {
        self.switches
            .iter()
            .map(|s| controlplane::memory::footprint(&s.config).fixed_bytes)
            .fold(0, u64::saturating_add)
    }

    /// The same fabric with other traffic (checked as the file's `[[traffic]]` would be).
    pub fn with_traffic(&self, traffic: &[TrafficSpec], seed: u64) -> Result<Topology> {
        let (flows, offered_bps) = expand_traffic(traffic, self, seed)?;
        Ok(Topology {
            flows,
            offered_bps,
            ..self.clone()
        })
    }
}

fn expand_traffic(traffic: &[TrafficSpec], topo: &Topology, seed: u64) -> Result<(Vec<FlowSpec>, Vec<f64>)> {
    let hosts = &topo.hosts;
    let mut flows = Vec::new();
    let mut offered_bps = vec![0.0; hosts.len()];
    let mut rng = crate::egress::rng::Rng::new(seed ^ 0x5eed_fab1);
    let host_idx = |name: &str, what: &str| -> Result<usize> {
        if let Some(h) = hosts.iter().position(|h| h.name == name) {
            return Ok(h);
        }
        if topo.switches.iter().any(|s| s.name == name) {
            bail!("{what}: {name:?} is a switch, not a host");
        }
        bail!("{what}: no host named {name:?}")
    };
    for (i, t) in traffic.iter().enumerate() {
        let what = format!("traffic {} ({})", i + 1, t.pattern);
        let start_ns = dur(t.start.as_deref().unwrap_or("0s"), &format!("{what}: start"))?;
        let from: Vec<usize> = t.from.iter().map(|n| host_idx(n, &what)).collect::<Result<_>>()?;
        let to: Vec<usize> = t.to.iter().map(|n| host_idx(n, &what)).collect::<Result<_>>()?;
        let pairs = pattern_pairs(&what, &t.pattern, from, to, hosts, &mut rng)?;
        let flow = |src: usize, dst: usize, size: FlowSize, start_ns: u64| FlowSpec {
            pattern: t.pattern.clone(),
            src,
            dst,
            size,
            start_ns,
        };
        match (&t.sizes, t.load) {
            (None, None) => {
                if t.stop.is_some() {
                    bail!("{what}: stop applies to messages from `sizes` only");
                }
                let size = match &t.size {
                    Some(s) if s == "long" => FlowSize::Long,
                    Some(s) => {
                        let b = units::parse_size(s).map_err(|e| anyhow!("{what}: size: {e}"))?;
                        check_message_size(b).map_err(|e| anyhow!("{what}: size: {e}, or \"long\""))?;
                        FlowSize::Bytes(b)
                    }
                    None => FlowSize::Long,
                };
                for (s, d) in pairs {
                    flows.push(flow(s, d, size, start_ns));
                }
            }
            (Some(sizes), Some(load)) => {
                if t.size.is_some() {
                    bail!("{what}: give `size` (one message per pair) or `sizes` (a distribution), not both");
                }
                let dist = SizeDist::new(sizes).map_err(|e| anyhow!("{what}: sizes: {e}"))?;
                if !(load > 0.0 && load <= 1.0) {
                    bail!(
                        "{what}: load must be above 0 and at most 1 (a fraction of the sender's line rate), got {load}"
                    );
                }
                let stop_ns = match &t.stop {
                    Some(s) => dur(s, &format!("{what}: stop"))?,
                    None => topo.duration_ns,
                };
                if stop_ns <= start_ns {
                    bail!("{what}: stop ({stop_ns} ns) must be after start ({start_ns} ns)");
                }
                let before = flows.len();
                // Per source, in order: a Poisson process of messages, each to one of the
                // source's destinations in the pattern, uniformly.
                let mut srcs: Vec<usize> = pairs.iter().map(|p| p.0).collect();
                srcs.dedup();
                for src in srcs {
                    let dsts: Vec<usize> = pairs.iter().filter(|p| p.0 == src).map(|p| p.1).collect();
                    let bps = topo.links[hosts[src].link].speed_bps as f64;
                    for &d in &dsts {
                        offered_bps[d] += load * bps / dsts.len() as f64;
                    }
                    let mean_gap_ns = dist.mean * 8.0 / (load * bps) * 1e9;
                    let mut t_ns = start_ns as f64;
                    loop {
                        t_ns += -unit_open(&mut rng).ln() * mean_gap_ns;
                        if t_ns >= stop_ns as f64 {
                            break;
                        }
                        let size = dist.sample(&mut rng);
                        let dst = dsts[(rng.next_u64() % dsts.len() as u64) as usize];
                        flows.push(flow(src, dst, FlowSize::Bytes(size), t_ns as u64));
                        if flows.len() - before > MAX_MESSAGES {
                            bail!(
                                "{what}: more than {MAX_MESSAGES} messages; lower load, stop or the duration, or use larger sizes"
                            );
                        }
                    }
                }
            }
            (Some(_), None) => bail!("{what}: sizes needs load (each sender's fraction of its line rate)"),
            (None, Some(_)) => bail!("{what}: load applies to `sizes` (a message size distribution) only"),
        }
    }
    if flows.is_empty() {
        bail!("no traffic: add a [[traffic]] (incast, all-to-all, permutation or flows)");
    }
    // Per destination, what is known of each switch's routes to it (shared by every flow there).
    let mut known: Vec<Vec<Visit>> = vec![Vec::new(); hosts.len()];
    for f in &flows {
        let k = &mut known[f.dst];
        if k.is_empty() {
            k.resize(topo.switches.len(), Visit::New);
        }
        check_reachable(f.src, f.dst, &topo.switches, hosts, &topo.links, k)?;
    }
    Ok((flows, offered_bps))
}

fn check_message_size(b: u64) -> std::result::Result<(), String> {
    if b == 0 || b > u64::from(u32::MAX) {
        return Err("must be 1 B ..= 4 GiB".into());
    }
    Ok(())
}

/// Uniform in (0, 1]: never 0, so its logarithm is finite.
fn unit_open(rng: &mut crate::egress::rng::Rng) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// An empirical message-size distribution: sizes with weights.
struct SizeDist {
    /// (bytes, cumulative weight), ascending weight.
    cdf: Vec<(u64, f64)>,
    mean: f64,
}

impl SizeDist {
    fn new(sizes: &[(SizeValue, Number)]) -> Result<SizeDist> {
        if sizes.is_empty() {
            bail!("empty: give [[bytes, weight], ...]");
        }
        let mut cdf = Vec::new();
        let mut total = 0.0;
        let mut weighted = 0.0;
        for (k, (size, weight)) in sizes.iter().enumerate() {
            let b = size.bytes().map_err(|e| anyhow!("entry {}: {e}", k + 1))?;
            check_message_size(b).map_err(|e| anyhow!("entry {}: size {e}", k + 1))?;
            let w = weight.get();
            if !(w.is_finite() && w > 0.0) {
                bail!("entry {}: weight must be a positive number, got {w}", k + 1);
            }
            total += w;
            weighted += w * b as f64;
            cdf.push((b, total));
        }
        Ok(SizeDist {
            cdf,
            mean: weighted / total,
        })
    }

    fn sample(&self, rng: &mut crate::egress::rng::Rng) -> u64 {
        let total = self.cdf.last().expect("non-empty").1;
        let x = unit_open(rng) * total;
        self.cdf
            .iter()
            .find(|(_, c)| x <= *c)
            .map_or(self.cdf.last().expect("non-empty").0, |(b, _)| *b)
    }
}

/// The (source, destination) pairs of a pattern, in a fixed order.
fn pattern_pairs(
    what: &str,
    pattern: &str,
    from: Vec<usize>,
    to: Vec<usize>,
    hosts: &[HostSpec],
    rng: &mut crate::egress::rng::Rng,
) -> Result<Vec<(usize, usize)>> {
    let mut pairs = Vec::new();
    match pattern {
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
                pairs.push((s, dst));
            }
        }
        // Every `from` host (default: all) to every other `to` host (default: the `from` set).
        "all-to-all" => {
            let from: Vec<usize> = if from.is_empty() {
                (0..hosts.len()).collect()
            } else {
                from
            };
            let to = if to.is_empty() { from.clone() } else { to };
            for &s in &from {
                for &d in &to {
                    if s != d {
                        pairs.push((s, d));
                    }
                }
            }
            if pairs.is_empty() {
                bail!("{what}: all-to-all needs at least two distinct hosts");
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
            if let Some((k, &h)) = set.iter().enumerate().find(|(k, h)| set[..*k].contains(h)) {
                // A host listed twice would be sent to itself (or to one host twice).
                bail!(
                    "{what}: {:?} is listed twice in `from` (entry {}): a permutation's hosts are distinct",
                    hosts[h].name,
                    k + 1
                );
            }
            if set.len() < 2 {
                bail!("{what}: a permutation needs at least two hosts");
            }
            // Sattolo's algorithm: a uniformly random single cycle, so no host maps to itself.
            let mut perm = set.clone();
            for k in (1..perm.len()).rev() {
                let j = (rng.next_u64() % k as u64) as usize;
                perm.swap(k, j);
            }
            pairs.extend(set.iter().copied().zip(perm));
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
                    pairs.push((s, d));
                }
            }
        }
        other => bail!("{what}: unknown pattern {other:?} (incast, all-to-all, permutation, flows)"),
    }
    Ok(pairs)
}

fn check_name(name: &str, kind: &str) -> Result<()> {
    if name.is_empty() || name.contains(':') || name.contains(char::is_whitespace) {
        bail!("{kind} name {name:?}: must be non-empty, without ':' or spaces");
    }
    Ok(())
}

/// `"h0"` (a host), `"leaf0:3"` (port id 3 of switch leaf0) or `"tor:Ethernet0"` (the port
/// its config names so: a config_db.json's ports keep their names).
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
            let cfg = &switches[*sw].config;
            let idx = port_index(cfg, p).ok_or_else(|| anyhow!("switch {name:?} has no port {p}{}", ports_of(cfg)))?;
            Ok(End::Switch(*sw, idx))
        }
    }
}

/// The index of the port `p` names in `cfg`: a number is its id (as topologies always said),
/// anything else its name.
fn port_index(cfg: &controlplane::Config, p: &str) -> Option<usize> {
    match p.parse::<u16>() {
        Ok(id) => cfg.ports.iter().position(|q| q.id == id),
        Err(_) => cfg.ports.iter().position(|q| q.name.as_deref() == Some(p)),
    }
}

/// ` (its config has ports 0, 1, …)`, or with their names `Ethernet0 (0), …`.
fn ports_of(cfg: &controlplane::Config) -> String {
    let ports: Vec<String> = cfg
        .ports
        .iter()
        .map(|q| match &q.name {
            Some(n) if n.parse::<u16>().ok() != Some(q.id) => format!("{n} ({})", q.id),
            _ => q.id.to_string(),
        })
        .collect();
    format!(" (its config has ports {})", ports.join(", "))
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

/// What [`check_reachable`] knows of a switch's routes to one destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visit {
    New,
    /// On the path being followed: reaching it again is a loop.
    OnPath,
    /// Every route from it arrives.
    Arrives,
}

/// Follows the routes (every ECMP choice) from `src` to `dst`: each must arrive, without a
/// loop, or the error names where it stops. A depth-first walk that visits each switch once
/// (`known`, per switch, kept across the flows to `dst`): the paths themselves multiply with
/// every ECMP layer, the switches do not.
fn check_reachable(
    src: usize,
    dst: usize,
    switches: &[SwitchSpec],
    hosts: &[HostSpec],
    links: &[Link],
    known: &mut [Visit],
) -> Result<()> {
    let (from, to) = (&hosts[src].name, &hosts[dst].name);
    let leads_elsewhere = || anyhow!("no route from {from:?} to {to:?}: a route leads to another host");
    let start = match other_end(&links[hosts[src].link], End::Host(src)) {
        End::Switch(s, _) => s,
        End::Host(h) if h == dst => return Ok(()),
        End::Host(_) => return Err(leads_elsewhere()),
    };
    if known[start] == Visit::Arrives {
        return Ok(());
    }
    known[start] = Visit::OnPath;
    // (switch, how many of its route's ports are followed).
    let mut path = vec![(start, 0usize)];
    while let Some((s, k)) = path.last_mut() {
        let s = *s;
        let ports = &switches[s].routes[dst];
        if ports.is_empty() {
            bail!(
                "no route from {from:?} to {to:?}: switch {:?} has none (the hosts are not connected, or a [[route]] is missing)",
                switches[s].name
            );
        }
        let Some(&p) = ports.get(*k) else {
            known[s] = Visit::Arrives;
            path.pop();
            continue;
        };
        *k += 1;
        let li = switches[s].links[p].expect("routes use linked ports");
        match other_end(&links[li], End::Switch(s, p)) {
            End::Host(h) if h == dst => {}
            End::Host(_) => return Err(leads_elsewhere()),
            End::Switch(t, _) => match known[t] {
                Visit::New => {
                    known[t] = Visit::OnPath;
                    path.push((t, 0));
                }
                Visit::OnPath => bail!(
                    "no route from {from:?} to {to:?}: the routes loop (at switch {:?})",
                    switches[t].name
                ),
                Visit::Arrives => {}
            },
        }
    }
    Ok(())
}
