//! `rocesw lab up` / `rocesw lab down`: test hosts for the real switch, one Linux network
//! namespace per host, cabled to the root namespace by a veth pair.
//!
//! For lab `NAME` and host `i`:
//!
//! ```text
//!  namespace NAME-h<i>                  root namespace
//!  ┌──────────────────────────────┐
//!  │ eth0  host_mac(i)            │ veth  NAMEp<id>  ← `rocesw run` attaches here (the
//!  │       host_ip(i)/15          ├──────────  i-th port, id <id>); no IP, IPv6 disabled
//!  │       fd00:5253:57::<i+1>/64 │
//!  │ static neighbours: all hosts │
//!  └──────────────────────────────┘
//! ```
//!
//! Everything is done with the `ip` command (iproute2), each command's exit status checked.
//! `up` records every namespace and interface it creates in `<state dir>/NAME.json` as it goes
//! (so even an interrupted `up` can be undone) and writes the switch config for the lab to
//! `<state dir>/NAME.toml`: the base config with its `[[port]]` tables replaced by one port per
//! host (a SONiC config_db.json base keeps its ports: host i is cabled to the i-th, and the
//! veth is named after the port, `NAME-Ethernet8`, when every such name fits in IFNAMSIZ, else
//! after its id, `NAMEp8`). The state file also carries the config's lossless DSCPs and its
//! DSCP → priority map ([`LabClasses`]), so that `rocegen coordinate --lab` sends lossless
//! traffic by default whatever the switch's maps are. `down` removes exactly what the state file
//! lists, and nothing else: the state dir too (and its parents) where `up` created it, once empty.

use crate::tools::gen::{host_ip, host_mac};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::io::{ErrorKind, Write};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where the CLI keeps lab state unless told otherwise.
pub const DEFAULT_STATE_DIR: &str = "/run/rocesw/lab";
/// The host's interface inside its namespace.
pub const HOST_IF: &str = "eth0";
/// Prefix length of the hosts' IPv4 addresses (198.18.0.0/15, RFC 2544 benchmarking).
pub const IPV4_PREFIX: u8 = 15;
/// Prefix length of the hosts' IPv6 addresses (fd00:5253:57::/64, a ULA).
pub const IPV6_PREFIX: u8 = 64;
/// Lab configs let the switch sleep this long after an idle round: hosts share the cores.
pub const LAB_IDLE_SLEEP: &str = "20us";
/// At most this many hosts: the config's port limit.
pub const MAX_HOSTS: usize = 64;
/// Where iproute2 keeps named network namespaces.
const NETNS_RUN_DIR: &str = "/run/netns";
const STATE_FORMAT: u32 = 1;

/// What `up` builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabSpec {
    /// 1–8 characters of `[a-z0-9]` (interface names must fit in 15 characters).
    pub name: String,
    /// 1–64 hosts, one switch port each.
    pub hosts: usize,
    /// Port speed written into the config's `[port_defaults]`, e.g. `"25G"`.
    pub speed: String,
    /// MTU of both veth ends, and the ports' `mtu` in the config (1280–9216: the hosts have
    /// IPv6). `None`: a config_db.json's own (each port's `PORT|…|mtu`, 9100 in most), else
    /// [`DEFAULT_MTU`].
    pub mtu: Option<u32>,
}

/// The MTU of a lab made from a TOML profile when none is asked for.
pub const DEFAULT_MTU: u32 = 1500;

/// A lab that is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lab {
    /// The lab's name, the prefix of its namespaces and interfaces.
    pub name: String,
    /// Its hosts, host `i` on switch port `i`.
    pub hosts: Vec<LabHost>,
    /// The switch config for the lab: its i-th port is `hosts[i].switch_if`.
    pub config_path: PathBuf,
    /// The config's lossless DSCPs and DSCP → priority map, for the hosts' traffic.
    pub classes: LabClasses,
    /// What `up` chose that the user should know (an MTU other than the file's, a note on the
    /// classes), printed with the lab.
    pub notes: Vec<String>,
    state_path: PathBuf,
}

impl Lab {
    /// The state file `down` reads.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }
}

/// One line per host, then the config: what `rocesw lab up` prints.
impl fmt::Display for Lab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "lab {}: {} host(s)", self.name, self.hosts.len())?;
        for h in &self.hosts {
            writeln!(
                f,
                "  {:<11} port {:<3} veth {:<15} <-> {}:{}  {}  {}/{IPV4_PREFIX}  {}/{IPV6_PREFIX}  mtu {}",
                h.port_label(),
                h.port_id,
                h.switch_if,
                h.netns,
                h.host_if,
                h.mac_string(),
                h.ipv4,
                h.ipv6,
                h.mtu
            )?;
        }
        writeln!(f, "{}", self.classes)?;
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        write!(f, "switch config: {}", self.config_path.display())
    }
}

/// The switch's traffic classes as its hosts need them: which DSCPs cross it losslessly, and
/// which PFC priority pauses each DSCP. `rocegen coordinate --lab` sends on the first lossless
/// DSCP with this map unless told otherwise: the default profile's DSCP 26 is a lossy class in
/// SONiC's AZURE maps (TC 1), where an incast then loses frames by the hundred thousand.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabClasses {
    /// DSCPs whose traffic class is lossless on every port of the lab (PFC on for it, and the
    /// PG it maps to lossless), lowest first. Empty when the switch does not classify by DSCP.
    pub lossless_dscps: Vec<u8>,
    /// DSCP → traffic class, which is the PFC priority that pauses it, as rocegen's
    /// `--prio-map` takes it (`"3=3,4=4,…"`; a DSCP not listed is class 0).
    pub prio_map: String,
}

impl LabClasses {
    /// The classes of `cfg` on the ports with these ids (the lab's; none: every port).
    pub fn of(cfg: &controlplane::Config, ids: &[u16]) -> LabClasses {
        let c = &cfg.classify;
        if c.trust != controlplane::Trust::Dscp {
            return LabClasses::default();
        }
        let ports: Vec<&controlplane::PortConfig> = cfg
            .ports
            .iter()
            .filter(|p| ids.is_empty() || ids.contains(&p.id))
            .collect();
        let lossless = |tc: u8| {
            let tc = usize::from(tc);
            !ports.is_empty()
                && ports
                    .iter()
                    .all(|p| p.pfc_enabled[tc] && p.pgs[usize::from(c.tc_to_pg[tc])].lossless)
        };
        LabClasses {
            lossless_dscps: (0..64u8).filter(|&d| lossless(c.dscp_to_tc[usize::from(d)])).collect(),
            prio_map: (0..64usize)
                .filter(|&d| c.dscp_to_tc[d] != 0)
                .map(|d| format!("{d}={}", c.dscp_to_tc[d]))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The DSCP the hosts' traffic uses by default: the first lossless one.
    pub fn default_dscp(&self) -> Option<u8> {
        self.lossless_dscps.first().copied()
    }
}

/// One line: the lossless DSCPs, and what rocegen will use.
impl fmt::Display for LabClasses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.default_dscp() {
            Some(d) => write!(
                f,
                "lossless DSCPs: {} (`rocegen coordinate --lab` sends DSCP {d} unless --dscp says otherwise)",
                self.lossless_dscps
                    .iter()
                    .map(u8::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => write!(
                f,
                "lossless DSCPs: none (the switch classifies no DSCP into a lossless class on every lab port)"
            ),
        }
    }
}

/// One test host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabHost {
    /// Its position: host i is cabled to the config's i-th port.
    pub index: usize,
    /// That port's `id` in the config (Ethernet8's is 8). Absent in older state files: the index.
    #[serde(default)]
    pub port_id: u16,
    /// That port's name in the config, if it has one (`Ethernet8`, `h2`).
    #[serde(default)]
    pub port_name: Option<String>,
    /// The MTU of both veth ends (the port's `mtu` in the config).
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Its network namespace, `NAME-h<i>`.
    pub netns: String,
    /// Its interface inside the namespace, `eth0`.
    pub host_if: String,
    /// The veth end in the root namespace the switch attaches to: `NAMEp<id>`, or
    /// `NAME-<port name>` for a config_db.json's ports when every one fits in 15 bytes.
    pub switch_if: String,
    /// `gen::host_mac(i)`, on `host_if` (`"02:00:5e:10:00:00"` in the state file).
    #[serde(with = "mac_serde")]
    pub mac: [u8; 6],
    /// `gen::host_ip(i)`, /15 on `host_if`.
    pub ipv4: Ipv4Addr,
    /// `fd00:5253:57::<i+1>`, /64 on `host_if`.
    pub ipv6: Ipv6Addr,
}

fn default_mtu() -> u32 {
    DEFAULT_MTU
}

impl LabHost {
    /// The MAC as `02:00:5e:10:00:00`.
    pub fn mac_string(&self) -> String {
        mac_string(&self.mac)
    }

    /// The port's name, or `port <id>` when it has none.
    pub fn port_label(&self) -> String {
        self.port_name
            .clone()
            .unwrap_or_else(|| format!("port {}", self.port_id))
    }
}

/// What `down` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownReport {
    /// The lab asked about.
    pub name: String,
    /// A state file existed. If not, nothing was touched (the lab was already down, or never up).
    pub found: bool,
    /// Root-namespace veth ends deleted (each takes its peer in the namespace with it).
    pub interfaces_removed: Vec<String>,
    /// Host namespaces deleted.
    pub namespaces_removed: Vec<String>,
    /// The lab's files deleted (state file, config).
    pub files_removed: Vec<PathBuf>,
    /// Directories `up` created for its state and `down` removed, empty (deepest first).
    pub dirs_removed: Vec<PathBuf>,
    /// Interfaces and namespaces in the state file that no longer existed.
    pub already_gone: Vec<String>,
    /// Interfaces in the state file that exist but are no longer veths: someone else's, left alone.
    pub left_alone: Vec<String>,
}

impl fmt::Display for DownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.found {
            return write!(f, "lab {}: no state file, nothing to remove", self.name);
        }
        write!(
            f,
            "lab {}: removed {} interface(s) [{}], {} namespace(s) [{}], {} file(s)",
            self.name,
            self.interfaces_removed.len(),
            self.interfaces_removed.join(" "),
            self.namespaces_removed.len(),
            self.namespaces_removed.join(" "),
            self.files_removed.len()
        )?;
        for d in &self.dirs_removed {
            write!(f, "; removed its empty state directory {}", d.display())?;
        }
        if !self.already_gone.is_empty() {
            write!(f, "; already gone: {}", self.already_gone.join(" "))?;
        }
        if !self.left_alone.is_empty() {
            write!(f, "; left alone (no longer a veth): {}", self.left_alone.join(" "))?;
        }
        Ok(())
    }
}

/// The state file: everything `up` created, appended as it is created.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    format: u32,
    rocesw_version: String,
    name: String,
    /// False while `up` is still running (or if it was interrupted).
    complete: bool,
    /// Namespaces created, in order.
    namespaces: Vec<String>,
    /// Root-namespace veth ends created, in order.
    interfaces: Vec<String>,
    /// The config file, once written.
    config_path: Option<PathBuf>,
    hosts: Vec<LabHost>,
    /// The directories `up` created to hold the state file (the state dir and any missing
    /// parent), deepest first: `down` removes each that is empty then. Absent in older files.
    #[serde(default)]
    created_dirs: Vec<PathBuf>,
    /// The config's lossless DSCPs and priority map (rocegen reads them). Absent in older files.
    #[serde(default)]
    classes: LabClasses,
    /// `up`'s notes. Absent in older files.
    #[serde(default)]
    notes: Vec<String>,
}

/// Fails unless this process may create network namespaces.
pub fn require_root() -> Result<()> {
    const MSG: &str = "rocesw lab needs root (CAP_NET_ADMIN) to create network namespaces";
    // CAP_NET_ADMIN = 12 (interfaces, addresses), CAP_SYS_ADMIN = 21 (`ip netns add` mounts).
    let status = fs::read_to_string("/proc/self/status").map_err(|e| anyhow!("{MSG} (cannot read /proc: {e})"))?;
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .ok_or_else(|| anyhow!("{MSG} (no CapEff in /proc/self/status)"))?;
    let missing: Vec<&str> = [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")]
        .into_iter()
        .filter(|&(bit, _)| cap_eff & (1 << bit) == 0)
        .map(|(_, name)| name)
        .collect();
    if !missing.is_empty() {
        bail!("{MSG}; this process lacks {}", missing.join(" and "));
    }
    Ok(())
}

/// Checks a lab name: 1–8 characters of `[a-z0-9]`, so `NAMEp63` fits in IFNAMSIZ.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 8 || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
        bail!(
            "lab name {name:?} is not valid: use 1-8 characters of a-z and 0-9 \
             (interface names NAMEp<i> must fit in 15 characters)"
        );
    }
    Ok(())
}

fn validate_spec(spec: &LabSpec) -> Result<()> {
    validate_name(&spec.name)?;
    if spec.hosts == 0 || spec.hosts > MAX_HOSTS {
        bail!(
            "lab {}: {} hosts; a lab has 1-{MAX_HOSTS} (one switch port each)",
            spec.name,
            spec.hosts
        );
    }
    if let Some(mtu) = spec.mtu {
        check_mtu(&spec.name, mtu, "")?;
    }
    if spec.speed.trim().is_empty() {
        bail!("lab {}: speed is empty (e.g. \"25G\")", spec.name);
    }
    Ok(())
}

/// An MTU the hosts can have: 1280 (IPv6's least) to 9216 (the config's most). `whose` says
/// where it came from, for the error.
fn check_mtu(lab: &str, mtu: u32, whose: &str) -> Result<()> {
    if !(1280..=9216).contains(&mtu) {
        bail!(
            "lab {lab}: mtu {mtu}{whose} is not in 1280-9216 (the hosts have IPv6 addresses, which need 1280){}",
            if whose.is_empty() { "" } else { "; give --mtu" }
        );
    }
    Ok(())
}

/// The switch port a host is cabled to, as the lab's config has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPlan {
    /// Its `id`.
    pub id: u16,
    /// Its `name`.
    pub name: Option<String>,
    /// Its MTU (its `mtu`, or the lab's).
    pub mtu: u32,
}

/// Host `i` of lab `name`, on `port` through the veth `switch_if`: names and addresses,
/// nothing created.
pub fn plan_host(name: &str, i: usize, port: &PortPlan, switch_if: String) -> LabHost {
    let n = u16::try_from(i).expect("host index fits in u16");
    LabHost {
        index: i,
        port_id: port.id,
        port_name: port.name.clone(),
        mtu: port.mtu,
        netns: format!("{name}-h{i}"),
        host_if: HOST_IF.to_string(),
        switch_if,
        mac: host_mac(n),
        ipv4: Ipv4Addr::from(host_ip(n)),
        ipv6: Ipv6Addr::new(0xfd00, 0x5253, 0x57, 0, 0, 0, 0, n + 1),
    }
}

/// The longest interface name Linux takes (IFNAMSIZ less its NUL).
pub const IFNAME_MAX: usize = 15;

/// The root-namespace veth of each port. A config_db.json's ports are named after the port
/// (`lab-Ethernet8`, what `ip link` then shows) when every such name is a valid interface name
/// of at most [`IFNAME_MAX`] bytes; otherwise, and for a TOML profile's, after the port's id
/// (`labp8`, at most 8 + 1 + 5 bytes). One rule for the whole lab, never a mix.
pub fn veth_names(lab: &str, ports: &[PortPlan], by_name: bool) -> Vec<String> {
    let named: Option<Vec<String>> = by_name
        .then(|| {
            ports
                .iter()
                .map(|p| {
                    let n = p.name.as_deref()?;
                    let ok = !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
                    let v = format!("{lab}-{n}");
                    (ok && v.len() <= IFNAME_MAX).then_some(v)
                })
                .collect()
        })
        .flatten();
    let unique = named.as_ref().is_some_and(|v| {
        let mut s = v.clone();
        s.sort();
        s.dedup();
        s.len() == v.len()
    });
    match named {
        Some(v) if unique => v,
        _ => ports.iter().map(|p| format!("{lab}p{}", p.id)).collect(),
    }
}

fn state_path(name: &str, state_dir: &Path) -> PathBuf {
    state_dir.join(format!("{name}.json"))
}

fn config_path(name: &str, state_dir: &Path) -> PathBuf {
    state_dir.join(format!("{name}.toml"))
}

/// What `up` builds, decided before anything is created.
#[derive(Debug, Clone)]
pub struct LabPlan {
    /// The lab's switch config ([`lab_config`]).
    pub config_text: String,
    /// The hosts, host i on the config's i-th port.
    pub hosts: Vec<LabHost>,
    /// The config's lossless DSCPs and priority map.
    pub classes: LabClasses,
    /// What the user should know about the choices made.
    pub notes: Vec<String>,
}

/// The lab's switch config: `base_text` with `[[port]]` replaced by one port per host
/// (`id = i`, `name = "h<i>"`, `interface = "NAMEp<i>"`) and `[port_defaults]` speed and mtu
/// set from the spec; every other section kept. Validated with `controlplane::load_str`.
///
/// A SONiC config_db.json base is a production switch's config, whose ports are the point:
/// host i is cabled to its i-th port instead, which keeps its name (`Ethernet8`), id, cable
/// length, MTU and per-port buffer profiles; only its speed becomes the lab's (veths are not
/// 100G links), and its MTU too if `spec.mtu` says so. Its text is the TOML it imports to,
/// written over so that every value keeps its SONiC origin comment (`rocectl show buffer`
/// reads them).
pub fn lab_config(spec: &LabSpec, base_text: &str, base_name: &str) -> Result<String> {
    Ok(plan(spec, base_text, base_name)?.config_text)
}

/// The lab `spec` on the profile `base_text`: its config ([`lab_config`]), hosts and classes.
pub fn plan(spec: &LabSpec, base_text: &str, base_name: &str) -> Result<LabPlan> {
    use toml::{Table, Value};
    let imported = controlplane::config_toml(base_text).map_err(|e| anyhow!("{base_name}: {e}"))?;
    let from_sonic = matches!(imported, std::borrow::Cow::Owned(_));
    let base_text = &*imported;
    let mut table: Table = base_text
        .parse()
        .with_context(|| format!("{base_name}: not a TOML config"))?;
    let base_ports: Vec<Table> = match table.get("port") {
        Some(Value::Array(ports)) if from_sonic => ports.iter().filter_map(Value::as_table).cloned().collect(),
        _ => Vec::new(),
    };
    if from_sonic && base_ports.len() < spec.hosts {
        bail!(
            "{base_name}: {} hosts need as many ports, and the switch has {}",
            spec.hosts,
            base_ports.len()
        );
    }
    // The file's ports as they load: their ids, names and MTUs.
    let file_ports = if from_sonic {
        controlplane::load_str(base_text)
            .map_err(|e| anyhow!("{base_name}: {e}"))?
            .config
            .ports
    } else {
        Vec::new()
    };
    let l2 = controlplane::headroom::L2_OVERHEAD_BYTES;
    let mut notes = Vec::new();
    let mut ports = Vec::with_capacity(spec.hosts);
    for i in 0..spec.hosts {
        let port = match file_ports.get(i) {
            Some(p) => {
                let own = p.max_frame_bytes.saturating_sub(l2);
                let label = p.name.clone().unwrap_or_else(|| format!("port {}", p.id));
                if spec.mtu.is_none() {
                    check_mtu(&spec.name, own, &format!(" (the file's, {label})"))?;
                }
                PortPlan {
                    id: p.id,
                    name: p.name.clone(),
                    mtu: spec.mtu.unwrap_or(own),
                }
            }
            None => PortPlan {
                id: u16::try_from(i).expect("at most MAX_HOSTS hosts"),
                name: Some(format!("h{i}")),
                mtu: spec.mtu.unwrap_or(DEFAULT_MTU),
            },
        };
        ports.push(port);
    }
    if let Some(mtu) = spec.mtu {
        let mut theirs: Vec<u32> = file_ports
            .iter()
            .take(spec.hosts)
            .map(|p| p.max_frame_bytes.saturating_sub(l2))
            .filter(|&m| m != mtu)
            .collect();
        theirs.sort_unstable();
        theirs.dedup();
        if !theirs.is_empty() {
            let theirs: Vec<String> = theirs.iter().map(u32::to_string).collect();
            notes.push(format!(
                "mtu {mtu} (--mtu) on every port and host; {base_name} says {}",
                theirs.join(", ")
            ));
        }
    }
    let veths = veth_names(&spec.name, &ports, from_sonic);
    let defaults = table
        .entry("port_defaults")
        .or_insert_with(|| Value::Table(Table::new()));
    let defaults = defaults
        .as_table_mut()
        .ok_or_else(|| anyhow!("{base_name}: port_defaults is not a table"))?;
    defaults.insert("speed".into(), Value::String(spec.speed.clone()));
    // A config_db.json's ports keep their own MTU unless the spec gives one.
    if !from_sonic || spec.mtu.is_some() {
        defaults.insert("mtu".into(), Value::Integer(spec.mtu.unwrap_or(DEFAULT_MTU).into()));
    }
    size_cnp_policer(&mut table, &spec.speed);
    let port_tables = (0..spec.hosts)
        .map(|i| {
            let mut port = match base_ports.get(i) {
                Some(base) => {
                    let mut port = base.clone();
                    // The lab's speed (and MTU if asked), from [port_defaults]; a capture-file
                    // or other backend the file may name gives way to the veth.
                    for key in ["speed", "pcap", "interface", "dpdk", "worker"] {
                        port.remove(key);
                    }
                    if spec.mtu.is_some() {
                        port.remove("mtu");
                    }
                    port
                }
                None => {
                    let mut port = Table::new();
                    port.insert("id".into(), Value::Integer(i as i64));
                    port.insert("name".into(), Value::String(format!("h{i}")));
                    port
                }
            };
            port.insert("interface".into(), Value::String(veths[i].clone()));
            Value::Table(port)
        })
        .collect();
    table.insert("port".into(), Value::Array(port_tables));
    // The hosts are processes on this machine, not NICs: they notice a PFC frame only when
    // they next poll, milliseconds late on a busy machine. Their ports are interfaces, so
    // emulated links (the default `peer` for interfaces): frames wait in the emulated NIC, not
    // in the switch's buffer, and `headroom = "auto"` covers a wire and the emulated step
    // (`rocectl check -v` shows it). Let the switch sleep when idle so the hosts get the CPU.
    let run = table.entry("run").or_insert_with(|| Value::Table(Table::new()));
    if let Some(run) = run.as_table_mut() {
        run.entry("idle")
            .or_insert_with(|| Value::String(LAB_IDLE_SLEEP.into()));
    }
    let body = if from_sonic {
        controlplane::retext::rewrite(base_text, &table).map_err(|e| anyhow!("writing the lab config: {e}"))?
    } else {
        toml::to_string(&table).context("serialising the lab config")?
    };
    let hosts: Vec<LabHost> = ports
        .iter()
        .zip(veths)
        .enumerate()
        .map(|(i, (p, v))| plan_host(&spec.name, i, p, v))
        .collect();
    let mut text = format!(
        "# rocesw lab {name}: {n} host(s), written by `rocesw lab up` from {base}.\n\
         # Each port, its veth, and its host (eth0 in a network namespace of its own):\n",
        name = spec.name,
        n = spec.hosts,
        base = base_name.escape_debug(),
    );
    for h in &hosts {
        text += &format!(
            "#   {} (port {}): veth {}, host {}\n",
            h.port_label().escape_debug(),
            h.port_id,
            h.switch_if,
            h.netns
        );
    }
    text += "\n";
    text += &body;
    let loaded = controlplane::load_str(&text)
        .map_err(|e| anyhow!("the lab config made from {base_name} does not load:\n{e}"))?;
    let ids: Vec<u16> = hosts.iter().map(|h| h.port_id).collect();
    let classes = LabClasses::of(&loaded.config, &ids);
    Ok(LabPlan {
        config_text: text,
        hosts,
        classes,
        notes,
    })
}

/// The CNP policer of a lab config sized to its ports, which all run at `speed`: a base
/// policer rate at or above the speed never limits (each port polices its own CNPs, and
/// validation warns), so it becomes 5% of the speed, as `configs/default.toml` has for 25G
/// (1.25G). A rate already below the speed is the profile's choice and stays. A speed or rate
/// that does not parse is left for validation to report.
fn size_cnp_policer(table: &mut toml::Table, speed: &str) {
    let Ok(speed_bps) = controlplane::units::parse_rate(speed) else {
        return;
    };
    let Some(policer) = table
        .get_mut("cnp")
        .and_then(|c| c.as_table_mut())
        .and_then(|c| c.get_mut("policer"))
        .and_then(|p| p.as_table_mut())
    else {
        return;
    };
    let rate = match policer.get("rate") {
        Some(toml::Value::String(r)) => controlplane::units::parse_rate(r).ok(),
        Some(toml::Value::Integer(r)) => u64::try_from(*r).ok(),
        _ => None,
    };
    if rate.is_some_and(|r| r >= speed_bps) {
        let sized = (speed_bps / 20).max(1);
        policer.insert(
            "rate".into(),
            toml::Value::String(controlplane::units::format_rate(sized)),
        );
    }
}

/// `rocesw lab VERB` for the lab `name` in `state_dir`, as a user would type it in a hint:
/// `--name` always, `--state-dir` unless it is the default.
pub fn lab_command(verb: &str, name: &str, state_dir: &Path) -> String {
    let mut cmd = format!("rocesw lab {verb} --name {name}");
    if state_dir != Path::new(DEFAULT_STATE_DIR) {
        cmd += &format!(" --state-dir {}", state_dir.display());
    }
    cmd
}

/// Creates the lab: namespaces, veths, addresses, neighbours, and its switch config.
///
/// Refuses if a lab of that name already has a state file in `state_dir`, or if any namespace
/// or interface it would create already exists. On a failure part-way, removes what it created.
/// `base_config`: the profile the lab's config starts from; `None` for the built-in default
/// profile ([`controlplane::DEFAULT_PROFILE`]).
pub fn up(spec: &LabSpec, base_config: Option<&Path>, state_dir: &Path) -> Result<Lab> {
    validate_spec(spec)?;
    require_root()?;
    if !Path::new("/proc/sys/net/ipv6").exists() {
        bail!("IPv6 is disabled in this kernel (no /proc/sys/net/ipv6); rocesw lab gives every host an IPv6 address");
    }
    let name = spec.name.as_str();
    let (base_text, base_name) = match base_config {
        Some(path) => (
            controlplane::files::read_text(path).map_err(anyhow::Error::msg)?,
            path.display().to_string(),
        ),
        None => (
            controlplane::DEFAULT_PROFILE.to_string(),
            controlplane::DEFAULT_PROFILE_NAME.to_string(),
        ),
    };
    let LabPlan {
        config_text,
        hosts,
        classes,
        notes,
    } = plan(spec, &base_text, &base_name)?;

    // The directories this `up` creates, deepest first: `down` removes them when empty.
    let created_dirs: Vec<PathBuf> = state_dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect();
    fs::create_dir_all(state_dir).with_context(|| format!("{}: cannot create", state_dir.display()))?;
    let state_path = state_path(name, state_dir);
    let config_path = config_path(name, state_dir);
    // The profile the lab starts from is never written over (by the lab's config or state).
    let inputs: Vec<(String, &Path)> = base_config.map(|p| ("--config".to_string(), p)).into_iter().collect();
    controlplane::files::refuse_aliased_outputs(
        &inputs,
        &[
            ("the lab's state file".to_string(), &state_path),
            ("the lab's config".to_string(), &config_path),
        ],
    )
    .map_err(anyhow::Error::msg)?;
    // Claim the name: create_new makes two concurrent `up`s of one name exclusive.
    match fs::OpenOptions::new().write(true).create_new(true).open(&state_path) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => bail!(
            "lab {name} already exists (state file {}); run `{}` first",
            state_path.display(),
            lab_command("down", name, state_dir)
        ),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot create", state_path.display())),
    }
    let mut state = State {
        format: STATE_FORMAT,
        rocesw_version: env!("CARGO_PKG_VERSION").to_string(),
        name: name.to_string(),
        complete: false,
        namespaces: Vec::new(),
        interfaces: Vec::new(),
        config_path: None,
        hosts: hosts.clone(),
        created_dirs,
        classes: classes.clone(),
        notes: notes.clone(),
    };
    let result = (|| -> Result<()> {
        save_state(&state_path, &state)?;
        check_free(name, &hosts)?;
        for host in &hosts {
            create_host(host, &hosts, &mut state, &state_path)
                .with_context(|| format!("setting up host {} ({})", host.index, host.netns))?;
        }
        state.config_path = Some(config_path.clone());
        save_state(&state_path, &state)?;
        fs::write(&config_path, &config_text).with_context(|| format!("{}: cannot write", config_path.display()))?;
        state.complete = true;
        save_state(&state_path, &state)
    })();
    match result {
        Ok(()) => Ok(Lab {
            name: name.to_string(),
            hosts,
            config_path,
            classes,
            notes,
            state_path,
        }),
        Err(e) => {
            let mut report = teardown(&state);
            remove_file(&state_path, &mut report);
            remove_empty_dirs(&state.created_dirs, &mut report);
            Err(e.context(format!(
                "`{}` failed and was rolled back ({report})",
                lab_command("up", name, state_dir)
            )))
        }
    }
}

/// Removes what `up` created, as recorded in the lab's state file, then the state and config
/// files. Tolerates anything already gone; with no state file it does nothing.
pub fn down(name: &str, state_dir: &Path) -> Result<DownReport> {
    validate_name(name)?;
    let state_path = state_path(name, state_dir);
    let state = match read_state(&state_path) {
        Ok(Some(state)) => state,
        Ok(None) => {
            return Ok(DownReport {
                name: name.to_string(),
                ..DownReport::default()
            })
        }
        Err(e) => return Err(e),
    };
    require_root()?;
    let mut report = teardown(&state);
    if let Some(config) = &state.config_path {
        remove_file(config, &mut report);
    }
    remove_file(&state_path, &mut report);
    remove_empty_dirs(&state.created_dirs, &mut report);
    Ok(report)
}

/// Removes, deepest first, each directory `up` created that is empty now; one that is not (another
/// lab's files, anything else) stays, with its parents.
fn remove_empty_dirs(dirs: &[PathBuf], report: &mut DownReport) {
    for d in dirs {
        match fs::remove_dir(d) {
            Ok(()) => report.dirs_removed.push(d.clone()),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(_) => break,
        }
    }
}

/// The lab `name` as `up` left it.
pub fn load(name: &str, state_dir: &Path) -> Result<Lab> {
    validate_name(name)?;
    let state_path = state_path(name, state_dir);
    let state = read_state(&state_path)?.ok_or_else(|| {
        anyhow!(
            "no lab {name} (no state file {}); `{}` creates one",
            state_path.display(),
            lab_command("up", name, state_dir)
        )
    })?;
    if !state.complete {
        bail!(
            "lab {name} is incomplete (its `up` was interrupted or is still running); `{}` removes it",
            lab_command("down", name, state_dir)
        );
    }
    let config_path = state.config_path.unwrap_or_else(|| config_path(name, state_dir));
    Ok(Lab {
        name: state.name,
        hosts: state.hosts,
        config_path,
        classes: state.classes,
        notes: state.notes,
        state_path,
    })
}

fn read_state(path: &Path) -> Result<Option<State>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read", path.display())),
    };
    let state: State =
        serde_json::from_str(&text).with_context(|| format!("{}: not a rocesw lab state file", path.display()))?;
    if state.format != STATE_FORMAT {
        bail!(
            "{}: state format {} (this rocesw reads {STATE_FORMAT})",
            path.display(),
            state.format
        );
    }
    Ok(Some(state))
}

/// Writes the state file atomically (temporary file, then rename).
fn save_state(path: &Path, state: &State) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut text = serde_json::to_string_pretty(state).expect("state serialises");
    text.push('\n');
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().with_context(|| format!("{}: cannot write", path.display()))
}

fn remove_file(path: &Path, report: &mut DownReport) {
    match fs::remove_file(path) {
        Ok(()) => report.files_removed.push(path.to_path_buf()),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("{}: cannot remove: {e}", path.display()),
    }
}

/// Refuses to start if anything the lab would create already exists: it is not ours.
fn check_free(name: &str, hosts: &[LabHost]) -> Result<()> {
    let mut taken = Vec::new();
    for h in hosts {
        if netns_exists(&h.netns) {
            taken.push(format!("network namespace {}", h.netns));
        }
        if link_exists(&h.switch_if)? {
            taken.push(format!("interface {}", h.switch_if));
        }
    }
    if !taken.is_empty() {
        bail!(
            "lab {name}: {} already exist(s) but no state file records it; \
             not created by this `rocesw lab` (or its state dir differs), so left alone",
            taken.join(", ")
        );
    }
    Ok(())
}

fn create_host(h: &LabHost, all: &[LabHost], state: &mut State, state_path: &Path) -> Result<()> {
    let mtu = h.mtu.to_string();
    ip(&["netns", "add", &h.netns])?;
    state.namespaces.push(h.netns.clone());
    save_state(state_path, state)?;

    // The host end is born inside the namespace as eth0: no temporary name in the root namespace.
    ip(&[
        "link",
        "add",
        &h.switch_if,
        "type",
        "veth",
        "peer",
        "name",
        &h.host_if,
        "netns",
        &h.netns,
    ])?;
    state.interfaces.push(h.switch_if.clone());
    save_state(state_path, state)?;

    // The switch end is a switch port: no addresses, and no router solicitations or MLD
    // reports of the kernel's own. Disabled while still down, before it could send any.
    let sysctl = format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", h.switch_if);
    fs::write(&sysctl, "1").with_context(|| format!("{sysctl}: cannot write"))?;
    ip(&["link", "set", "dev", &h.switch_if, "mtu", &mtu, "up"])?;

    // No duplicate address detection: addresses usable at once (link-local included).
    let accept_dad = format!("/proc/sys/net/ipv6/conf/{}/accept_dad", h.host_if);
    run(Command::new(ip_bin())
        .args(["netns", "exec", &h.netns, "sh", "-c"])
        .arg(format!("echo 0 > {accept_dad}")))?;

    let mut batch = format!(
        "link set dev lo up\n\
         link set dev {dev} address {mac} mtu {mtu}\n\
         address add {v4}/{IPV4_PREFIX} dev {dev}\n\
         address add {v6}/{IPV6_PREFIX} dev {dev} nodad\n\
         link set dev {dev} up\n",
        dev = h.host_if,
        mac = h.mac_string(),
        v4 = h.ipv4,
        v6 = h.ipv6,
    );
    for other in all.iter().filter(|o| o.index != h.index) {
        for addr in [other.ipv4.to_string(), other.ipv6.to_string()] {
            batch.push_str(&format!(
                "neighbour replace {addr} lladdr {} dev {} nud permanent\n",
                other.mac_string(),
                h.host_if
            ));
        }
    }
    ip_batch(&h.netns, &batch)
}

/// Deletes what `state` lists: root-namespace veths first (synchronously taking their peers
/// with them), then the namespaces. Never fails; problems are logged and the rest carries on.
fn teardown(state: &State) -> DownReport {
    let mut report = DownReport {
        name: state.name.clone(),
        found: true,
        ..DownReport::default()
    };
    for ifname in state.interfaces.iter().rev() {
        match link_kind(ifname) {
            Ok(None) => report.already_gone.push(ifname.clone()),
            Ok(Some(kind)) if kind != "veth" => report.left_alone.push(ifname.clone()),
            Ok(Some(_)) => match ip(&["link", "del", "dev", ifname]) {
                Ok(_) => report.interfaces_removed.push(ifname.clone()),
                // Gone in between (e.g. its namespace was deleted by hand just now).
                Err(_) if !link_exists(ifname).unwrap_or(true) => report.already_gone.push(ifname.clone()),
                Err(e) => tracing::warn!("lab {}: {e:#}", state.name),
            },
            Err(e) => tracing::warn!("lab {}: {e:#}", state.name),
        }
    }
    for ns in state.namespaces.iter().rev() {
        if !netns_exists(ns) {
            report.already_gone.push(ns.clone());
            continue;
        }
        match ip(&["netns", "del", ns]) {
            Ok(_) => report.namespaces_removed.push(ns.clone()),
            Err(_) if !netns_exists(ns) => report.already_gone.push(ns.clone()),
            Err(e) => tracing::warn!("lab {}: {e:#}", state.name),
        }
    }
    report
}

fn netns_exists(ns: &str) -> bool {
    Path::new(NETNS_RUN_DIR).join(ns).exists()
}

fn link_exists(ifname: &str) -> Result<bool> {
    Ok(link_kind(ifname)?.is_some())
}

/// The kind of root-namespace interface `ifname` (`"veth"`, `""` for a plain device), or None
/// if there is no such interface.
fn link_kind(ifname: &str) -> Result<Option<String>> {
    let out = Command::new(ip_bin())
        .args(["-j", "-d", "link", "show", "dev", ifname])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run `{}` (is iproute2 installed?)", ip_bin()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("does not exist") || stderr.contains("Cannot find device") {
            return Ok(None);
        }
        bail!(
            "`ip -j -d link show dev {ifname}` failed ({}): {}",
            out.status,
            stderr.trim()
        );
    }
    let links: serde_json::Value =
        serde_json::from_slice(&out.stdout).with_context(|| format!("`ip -j -d link show dev {ifname}`: not JSON"))?;
    let kind = links
        .get(0)
        .and_then(|l| l.get("linkinfo"))
        .and_then(|li| li.get("info_kind"))
        .and_then(|k| k.as_str())
        .unwrap_or("");
    Ok(Some(kind.to_string()))
}

/// The `ip` binary: on PATH, else iproute2's usual places (PATH may lack the sbin directories).
fn ip_bin() -> &'static str {
    static IP: OnceLock<String> = OnceLock::new();
    IP.get_or_init(|| {
        let on_path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("ip").is_file()))
            .unwrap_or(false);
        if on_path {
            return "ip".to_string();
        }
        ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .unwrap_or("ip")
            .to_string()
    })
}

fn ip(args: &[&str]) -> Result<String> {
    run(Command::new(ip_bin()).args(args))
}

/// Runs `ip -n NS -batch -` with `commands` on stdin; the first failing line stops it.
fn ip_batch(ns: &str, commands: &str) -> Result<()> {
    let shown = format!("{} -n {ns} -batch -", ip_bin());
    tracing::debug!("{shown} <<EOF\n{commands}EOF");
    let mut child = Command::new(ip_bin())
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run `{shown}` (is iproute2 installed?)"))?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(commands.as_bytes())
        .with_context(|| format!("`{shown}`: cannot write its commands"))?;
    let out = child.wait_with_output().with_context(|| format!("`{shown}`"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}): {}\ncommands:\n{commands}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs a command, returning its stdout; a non-zero exit is an error carrying the command line
/// and its stderr.
fn run(cmd: &mut Command) -> Result<String> {
    let shown = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    tracing::debug!("{shown}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run `{shown}` (is iproute2 installed?)"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn mac_string(mac: &[u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// A MAC as `aa:bb:cc:dd:ee:ff` in the state file.
mod mac_serde {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mac: &[u8; 6], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::mac_string(mac))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 6], D::Error> {
        let text = String::deserialize(d)?;
        let bytes: Vec<u8> = text
            .split(':')
            .map(|b| u8::from_str_radix(b, 16))
            .collect::<Result<_, _>>()
            .map_err(|_| D::Error::custom(format!("{text:?} is not a MAC")))?;
        bytes
            .try_into()
            .map_err(|_| D::Error::custom(format!("{text:?} is not a MAC")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hints name the lab and, unless it is the default, the state dir: `rocesw lab down`
    /// with them finds the lab (issue 10: a hint once read `rocesw lab down lab`).
    #[test]
    fn hints_are_command_lines() {
        let default = Path::new(DEFAULT_STATE_DIR);
        assert_eq!(lab_command("down", "lab", default), "rocesw lab down --name lab");
        assert_eq!(
            lab_command("up", "x1", Path::new("/tmp/labs")),
            "rocesw lab up --name x1 --state-dir /tmp/labs"
        );
        // Showing a lab that is not there needs no root.
        let dir = tempfile::tempdir().unwrap();
        let e = format!("{:#}", load("x1", dir.path()).unwrap_err());
        let hint = format!(
            "`rocesw lab up --name x1 --state-dir {}` creates one",
            dir.path().display()
        );
        assert!(e.contains(&hint), "{e}");
    }

    #[test]
    fn names() {
        for ok in ["a", "lab0", "abcdefgh", "12345678"] {
            validate_name(ok).unwrap();
        }
        for bad in ["", "abcdefghi", "Lab", "a-b", "a_b", "a b", "a/b", "é"] {
            let e = validate_name(bad).unwrap_err().to_string();
            assert!(e.contains("1-8 characters of a-z and 0-9"), "{e}");
        }
        // The longest switch-end name fits in IFNAMSIZ - 1, whatever the port's id or name.
        let port = |id: u16, name: &str| PortPlan {
            id,
            name: Some(name.into()),
            mtu: 1500,
        };
        let longest = [port(u16::MAX, "Ethernet65535")];
        for by_name in [false, true] {
            let v = veth_names("abcdefgh", &longest, by_name);
            assert_eq!(v, ["abcdefghp65535"]);
            assert!(v[0].len() <= IFNAME_MAX);
        }
        let h = plan_host("abcdefgh", MAX_HOSTS - 1, &longest[0], "x".into());
        assert!(h.netns.len() <= IFNAME_MAX);
    }

    /// Issue 49 item 2: a config_db.json's ports give their veths their names when every one
    /// fits (`lab-Ethernet4`), else all take their ids (`labp4`), never a mix and never a
    /// name Linux refuses.
    #[test]
    fn veths_are_named_after_the_files_ports() {
        let port = |id: u16, name: &str| PortPlan {
            id,
            name: Some(name.into()),
            mtu: 9100,
        };
        let sonic = [port(0, "Ethernet0"), port(4, "Ethernet4"), port(124, "Ethernet124")];
        assert_eq!(
            veth_names("lab", &sonic, true),
            ["lab-Ethernet0", "lab-Ethernet4", "lab-Ethernet124"]
        );
        // A TOML profile's ports: by id.
        assert_eq!(veth_names("lab", &sonic, false), ["labp0", "labp4", "labp124"]);
        // One name too long (16 bytes): every port by id.
        assert_eq!(veth_names("abcd", &sonic, true), ["abcdp0", "abcdp4", "abcdp124"]);
        // Names Linux would refuse or misread: by id.
        for bad in ["Eth 1", "Eth/1", "Eth:1", ""] {
            assert_eq!(veth_names("lab", &[port(1, bad)], true), ["labp1"], "{bad:?}");
        }
    }

    #[test]
    fn hosts_follow_gen() {
        let port = PortPlan {
            id: 8,
            name: Some("Ethernet8".into()),
            mtu: 9100,
        };
        let h = plan_host("x", 2, &port, "x-Ethernet8".into());
        assert_eq!(h.netns, "x-h2");
        assert_eq!(h.switch_if, "x-Ethernet8");
        assert_eq!((h.port_id, h.mtu), (8, 9100));
        assert_eq!(h.host_if, "eth0");
        assert_eq!(h.mac, host_mac(2));
        assert_eq!(h.mac_string(), "02:00:5e:10:00:02");
        assert_eq!(h.ipv4, Ipv4Addr::new(198, 18, 0, 3));
        assert_eq!(h.ipv6.to_string(), "fd00:5253:57::3");
        assert_eq!(
            plan_host("x", 15, &port, "xp8".into()).ipv6.to_string(),
            "fd00:5253:57::10"
        );
        let lab = Lab {
            name: "x".into(),
            hosts: vec![h.clone()],
            config_path: "x.toml".into(),
            classes: LabClasses {
                lossless_dscps: vec![3, 4],
                prio_map: "3=3,4=4".into(),
            },
            notes: vec!["a note".into()],
            state_path: "x.json".into(),
        };
        assert_eq!(
            lab.to_string(),
            "lab x: 1 host(s)\n  Ethernet8   port 8   veth x-Ethernet8     <-> x-h2:eth0  02:00:5e:10:00:02  \
             198.18.0.3/15  fd00:5253:57::3/64  mtu 9100\n\
             lossless DSCPs: 3, 4 (`rocegen coordinate --lab` sends DSCP 3 unless --dscp says otherwise)\n\
             note: a note\n\
             switch config: x.toml"
        );
        let json = serde_json::to_string(&h).unwrap();
        assert!(json.contains(r#""mac":"02:00:5e:10:00:02""#), "{json}");
        assert_eq!(serde_json::from_str::<LabHost>(&json).unwrap(), h);
        // A host of an older state file: its port is its index, its MTU 1500.
        let old = r#"{"index":2,"netns":"x-h2","host_if":"eth0","switch_if":"xp2","mac":"02:00:5e:10:00:02",
                      "ipv4":"198.18.0.3","ipv6":"fd00:5253:57::3"}"#;
        let old: LabHost = serde_json::from_str(old).unwrap();
        assert_eq!((old.mtu, old.port_name.as_deref()), (1500, None));
    }

    #[test]
    fn config_replaces_ports_and_keeps_the_rest() {
        let spec = LabSpec {
            name: "cfg".into(),
            hosts: 3,
            speed: "100G".into(),
            mtu: Some(4200),
        };
        let text = lab_config(&spec, include_str!("../../../configs/default.toml"), "default.toml").unwrap();
        let cfg = controlplane::load_str(&text).unwrap().config;
        assert_eq!(cfg.ports.len(), 3);
        for (i, p) in cfg.ports.iter().enumerate() {
            assert_eq!(p.id as usize, i);
            assert_eq!(p.name.as_deref(), Some(format!("h{i}").as_str()));
            assert_eq!(p.interface.as_deref(), Some(format!("cfgp{i}").as_str()));
            assert_eq!(p.speed_bps, 100_000_000_000);
            assert_eq!(p.max_frame_bytes, 4200 + 18);
        }
        let base = controlplane::load_str(include_str!("../../../configs/default.toml"))
            .unwrap()
            .config;
        assert_eq!(cfg.buffer, base.buffer);
        assert_eq!(cfg.pfc, base.pfc);
    }

    /// A config_db.json base keeps its ports (names, ids, cables, MTU, per-port headroom) in
    /// order, each on a veth named after it at the lab's speed, and its origin comments; the
    /// header names each port's veth and host as they are; more hosts than it has ports is
    /// refused. Issue 49 item 2: the veths were `sonp<i>` whatever the port's id, the header
    /// said "Port i is the veth sonp<i>" (Ethernet4 is port 4 and was on sonp1), and the
    /// file's MTU of 9100 became 1500 without a word.
    #[test]
    fn a_sonic_base_keeps_its_ports_and_their_origins() {
        let spec = LabSpec {
            name: "son".into(),
            hosts: 3,
            speed: "1G".into(),
            mtu: None,
        };
        let json = include_str!("../../../configs/sonic/spectrum1-t1.json");
        let plan = plan(&spec, json, "spectrum1-t1.json").unwrap();
        let text = &plan.config_text;
        assert!(
            text.contains("# BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff"),
            "{text}"
        );
        assert!(!text.contains("Port i is"), "{text}");
        assert!(
            text.contains("#   Ethernet4 (port 4): veth son-Ethernet4, host son-h1\n"),
            "{text}"
        );
        let cfg = controlplane::load_str(text).unwrap().config;
        let base = controlplane::load_str(json).unwrap().config;
        assert_eq!(cfg.ports.len(), 3);
        for (i, (p, b)) in cfg.ports.iter().zip(&base.ports).enumerate() {
            assert_eq!((p.id, &p.name), (b.id, &b.name));
            let veth = format!("son-{}", b.name.as_deref().unwrap());
            assert_eq!(p.interface.as_deref(), Some(veth.as_str()));
            assert_eq!(p.speed_bps, 1_000_000_000);
            assert_eq!(p.max_frame_bytes, 9100 + 18, "the file's MTU");
            assert_eq!(p.headroom_bytes, b.headroom_bytes, "port {}", p.id);
            let h = &plan.hosts[i];
            assert_eq!((h.port_id, h.port_name.as_ref(), h.mtu), (b.id, b.name.as_ref(), 9100));
            assert_eq!(h.switch_if, veth);
        }
        assert_eq!(cfg.ports[2].name.as_deref(), Some("Ethernet8"));
        assert!(plan.notes.is_empty(), "{:?}", plan.notes);
        // AZURE's lossless classes: DSCP 3 and 4 (TC 3 and 4), not the default profile's 26,
        // which is TC 1 there, a lossy queue.
        assert_eq!(plan.classes.lossless_dscps, [3, 4]);
        assert_eq!(plan.classes.default_dscp(), Some(3));
        let map = dataplane_prio_map(&plan.classes.prio_map);
        assert_eq!((map[3], map[4], map[26], map[48], map[8]), (3, 4, 1, 6, 0));
        // --mtu over the file's: taken, and said.
        let small = LabSpec {
            mtu: Some(1500),
            ..spec.clone()
        };
        let plan = super::plan(&small, json, "spectrum1-t1.json").unwrap();
        let cfg = controlplane::load_str(&plan.config_text).unwrap().config;
        assert!(cfg.ports.iter().all(|p| p.max_frame_bytes == 1500 + 18));
        assert!(plan.hosts.iter().all(|h| h.mtu == 1500));
        assert_eq!(
            plan.notes,
            ["mtu 1500 (--mtu) on every port and host; spectrum1-t1.json says 9100"]
        );
        let many = LabSpec { hosts: 9, ..spec };
        let e = lab_config(&many, json, "spectrum1-t1.json").unwrap_err().to_string();
        assert!(e.contains("9 hosts need as many ports, and the switch has 8"), "{e}");
    }

    /// `"3=3,4=4"` as an array by DSCP.
    fn dataplane_prio_map(text: &str) -> [u8; 64] {
        crate::nic::PrioMap::parse(text).unwrap().0
    }

    /// The default profile's lossless class is DSCP 26, which rocegen has always sent.
    #[test]
    fn the_default_profiles_lossless_dscp_is_26() {
        let spec = LabSpec {
            name: "d".into(),
            hosts: 2,
            speed: "1G".into(),
            mtu: None,
        };
        let plan = plan(&spec, include_str!("../../../configs/default.toml"), "default.toml").unwrap();
        assert_eq!(plan.classes.lossless_dscps, [26]);
        assert_eq!(dataplane_prio_map(&plan.classes.prio_map)[48], 6);
        assert!(plan.hosts.iter().all(|h| h.mtu == DEFAULT_MTU));
        assert_eq!(plan.hosts[1].switch_if, "dp1");
    }

    /// The base profile's 1.25G CNP policer (5% of 25G) is sized to the lab's ports when it
    /// would not limit them (1G: 50M, no warning), and kept where it does (100G).
    #[test]
    fn the_cnp_policer_is_sized_to_the_lab_ports() {
        let base = include_str!("../../../configs/default.toml");
        for (speed, rate) in [
            ("1G", 50_000_000),
            ("10M", 500_000),
            ("100G", 1_250_000_000),
            ("25G", 1_250_000_000),
        ] {
            let spec = LabSpec {
                name: "cnp".into(),
                hosts: 2,
                speed: speed.into(),
                mtu: Some(1500),
            };
            let loaded = controlplane::load_str(&lab_config(&spec, base, "default.toml").unwrap()).unwrap();
            let policer = loaded.config.cnp.policer.expect("the profile's policer is kept");
            assert_eq!(policer.rate_bps, rate, "{speed}");
            assert_eq!(policer.burst_bytes, 16 * 1024, "{speed}: the burst is kept");
            assert!(
                !loaded.warnings.iter().any(|w| w.contains("cnp.policer")),
                "{speed}: {:?}",
                loaded.warnings
            );
        }
    }

    #[test]
    fn bad_specs_are_rejected() {
        let good = LabSpec {
            name: "ok".into(),
            hosts: 2,
            speed: "25G".into(),
            mtu: Some(1500),
        };
        validate_spec(&good).unwrap();
        for bad in [
            LabSpec {
                hosts: 0,
                ..good.clone()
            },
            LabSpec {
                hosts: MAX_HOSTS + 1,
                ..good.clone()
            },
            LabSpec {
                mtu: Some(67),
                ..good.clone()
            },
            LabSpec {
                mtu: Some(9217),
                ..good.clone()
            },
            LabSpec {
                speed: " ".into(),
                ..good.clone()
            },
        ] {
            assert!(validate_spec(&bad).is_err(), "{bad:?}");
        }
        let e = lab_config(
            &LabSpec {
                speed: "25GB".into(),
                ..good
            },
            include_str!("../../../configs/default.toml"),
            "d",
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("speed"), "{e:#}");
    }
}
