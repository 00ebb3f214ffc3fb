//! `rocectl set`: one subcommand per live knob, each an edit of the running config's TOML.
//!
//! `rocectl` reads the running config (`get_config`), applies the edit here to the table and
//! sends the whole result with `apply`, which the switch validates and swaps in all or nothing
//! (written over the running text by `retext`, so the config's comments survive).
//! Editing the whole table rather than sending a `patch` is what lets a change *remove* keys
//! (a PG going from `static` to `alpha`) and reach one `[[port]]` (arrays replace whole in a
//! patch). The `apply` carries the version that was read (`if_version`); if another change
//! landed in between, the switch refuses it and `rocectl` reads again and redoes the edit, so
//! concurrent `set`s of different knobs all take effect.
//!
//! With `--port P`, PG and queue settings go to that port's own `pg.N`/`queue.N` overrides
//! (configs/README.md); an ECN change for one port's queue gives that queue its own profile,
//! `port<P>-queue<Q>`, copied from the one in force, so no other port changes.

use clap::{Args, Subcommand};
use toml::{Table, Value};

/// The knobs `rocectl set` edits, one subcommand each (clap reads the variants' docs as their
/// help).
#[derive(Subcommand, Debug, Clone)]
pub enum Set {
    /// Retune WRED-ECN: a profile by name, or the one a queue uses (globally, or on one port:
    /// that queue then gets its own profile).
    #[command(
        after_help = "Examples:\n  rocectl set ecn --profile roce --kmax 200KB\n  rocectl set ecn --port 3 --queue 3 --kmin 50KB --kmax 200KB --pmax 0.1\n  rocectl set ecn --port Ethernet8 --queue 3 --kmax 300KB      # a port by its config name"
    )]
    #[command(group(clap::ArgGroup::new("which").required(true).args(["profile", "queue"])))]
    Ecn(Ecn),
    /// The dynamic threshold (alpha) of an ingress PG or an egress queue; replaces a static
    /// limit if one was set.
    #[command(after_help = "Examples:\n  rocectl set alpha --pg 3 1/16\n  rocectl set alpha --port 0 --pg 3 1/4")]
    Alpha(Alpha),
    /// An ingress PG's reservation, static limit, headroom and XON offset.
    #[command(after_help = "Example:\n  rocectl set pg --pg 3 --headroom 40KiB --xon-offset 4KiB")]
    Pg(Pg),
    /// An egress queue's reservation, limit, scheduling and shaper.
    #[command(
        after_help = "Examples:\n  rocectl set queue --queue 0 --weight 3\n  rocectl set queue --port 2 --queue 1 --shaper-rate 5G --shaper-burst 64KiB"
    )]
    Queue(Queue),
    /// The EDF scheduler's settings ([port_defaults.edf], or one port's own): its mode, the
    /// regulated queues' and DSCPs' delay budgets, the flow-label tag.
    #[command(
        after_help = "Examples:\n  rocectl set edf --enable --mode take-over --budget 3=50us\n  rocectl set edf --port 2 --dscp-budget 24=20us --dscp-budget 30=2ms\n  rocectl set edf --mode fifo2 --no-budget 5"
    )]
    Edf(Edf),
    /// The CNP fast lane's policer.
    #[command(after_help = "Example:\n  rocectl set policer --rate 2.5G --burst 32KiB")]
    Policer(Policer),
    /// PFC: the lossless priorities, pause time and refresh.
    #[command(after_help = "Example:\n  rocectl set pfc --priorities 3,4 --pause-quanta 32768")]
    Pfc(Pfc),
    /// The PFC watchdog.
    #[command(after_help = "Example:\n  rocectl set watchdog --detection 100ms --restoration 200ms --action forward")]
    Watchdog(Watchdog),
    /// The port scheduler: its kind, and the VL arbitration tables and limit of `vlarb`
    /// ports (OpenSM's `qos_vlarb_high`, `qos_vlarb_low`, `qos_high_limit`), for every port
    /// (`[port_defaults]`) or one.
    #[command(
        after_help = "Examples:\n  rocectl set scheduler --kind vlarb --high 6:255,3:16 --low 0:64,1:128 --high-limit 6\n  rocectl set scheduler --port 2 --low 0:32,1:192\n  rocectl set scheduler --port 2 --kind sp_wdrr\n\nA live change of the tables keeps each table's place (the current entry goes on if it still\nnames the same VL); a change of kind starts the new scheduler fresh."
    )]
    Scheduler(Scheduler),
    /// Classification: what to trust, DSCP → traffic class entries, the default class.
    #[command(
        after_help = "Examples:\n  rocectl set dscp --map 26=3 --map 46=5 --default-tc 0\n  rocectl set dscp --map-set AZURE_UPLINK --map 2=1\n\nWith --map-set the entries go into that map set's DSCP map ([classify.map.NAME], the\nmaps of the ports that name it), which must give one of its own."
    )]
    Dscp(Dscp),
    /// A port's transmit, on or off (SAI's PKT_TX_ENABLE: with it off the port's queues fill
    /// and its PFC frames still go, how SONiC's QoS tests fill a buffer).
    #[command(after_help = "Examples:\n  rocectl set port Ethernet8 tx off\n  rocectl set port 8 tx on")]
    Port(PortKnob),
}

/// `rocectl set port` (the subcommand's help is on [`Set::Port`]).
#[derive(Args, Debug, Clone)]
pub struct PortKnob {
    /// The port: its id, or its name (`Ethernet8` in a config imported from SONiC).
    pub port: String,
    /// What to set: `tx`.
    #[arg(value_parser = ["tx"])]
    pub setting: String,
    /// `on` or `off`.
    #[arg(value_parser = ["on", "off"])]
    pub value: String,
}

impl PortKnob {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let edit = Table::from_iter([(self.setting.clone(), Value::String(self.value.clone()))]);
        controlplane::patch::merge_port(root, &self.port, edit)
    }
}

/// `rocectl set ecn` (the subcommand's help is on [`Set::Ecn`]).
#[derive(Args, Debug, Clone)]
pub struct Ecn {
    /// The profile's name ([ecn.NAME] in the config); or name the queue with --queue.
    #[arg(long, conflicts_with_all = ["queue", "port"])]
    pub profile: Option<String>,
    /// The egress queue whose profile to change (0-7).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..8))]
    pub queue: Option<u8>,
    /// Only on this port, with --queue: its name (`Ethernet8`) or id.
    #[arg(long, requires = "queue")]
    pub port: Option<String>,
    /// Queue length where marking starts: bytes, or 100KB (100 000), 100KiB or 100k
    /// (102 400).
    #[arg(long)]
    pub kmin: Option<String>,
    /// Queue length where the probability reaches pmax (every packet above), e.g. 400KB,
    /// 400k (KiB) or bytes.
    #[arg(long)]
    pub kmax: Option<String>,
    /// Marking probability at kmax, 0 to 1.
    #[arg(long)]
    pub pmax: Option<String>,
    /// Queue length the curve reads: `instant` or `ewma`.
    #[arg(long)]
    pub average: Option<String>,
    /// EWMA weight as a shift (weight = 2^-N), with --average ewma.
    #[arg(long)]
    pub ewma_shift: Option<i64>,
    /// Where to mark: `enqueue` or `dequeue`.
    #[arg(long)]
    pub mark_at: Option<String>,
    /// Non-ECN-capable packets above the curve: `pass` or `drop`.
    #[arg(long)]
    pub non_ect: Option<String>,
}

/// `rocectl set alpha` (the subcommand's help is on [`Set::Alpha`]).
#[derive(Args, Debug, Clone)]
pub struct Alpha {
    /// Only on this port: its name (`Ethernet8`) or id.
    #[arg(long)]
    pub port: Option<String>,
    /// The ingress PG whose shared limit to change (0-7); or --queue.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..8), required_unless_present = "queue", conflicts_with = "queue")]
    pub pg: Option<u8>,
    /// The egress queue whose shared limit to change (0-7); or --pg.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..8))]
    pub queue: Option<u8>,
    /// A number or a fraction such as 1/8.
    pub value: String,
}

/// `rocectl set pg` (the subcommand's help is on [`Set::Pg`]).
#[derive(Args, Debug, Clone)]
pub struct Pg {
    /// Only on this port: its name (`Ethernet8`) or id.
    #[arg(long)]
    pub port: Option<String>,
    /// The ingress PG (0-7).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..8))]
    pub pg: u8,
    /// Guaranteed minimum, e.g. 4KiB.
    #[arg(long)]
    pub min: Option<String>,
    /// A static shared limit instead of alpha, e.g. 200KB.
    #[arg(long = "static")]
    pub static_limit: Option<String>,
    /// `auto` or a size.
    #[arg(long)]
    pub headroom: Option<String>,
    /// How far below its limit the PG must fall before XON, e.g. 4KiB.
    #[arg(long)]
    pub xon_offset: Option<String>,
}

/// `rocectl set queue` (the subcommand's help is on [`Set::Queue`]).
#[derive(Args, Debug, Clone)]
pub struct Queue {
    /// Only on this port: its name (`Ethernet8`) or id.
    #[arg(long)]
    pub port: Option<String>,
    /// The egress queue (0-7).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..8))]
    pub queue: u8,
    /// Guaranteed minimum, e.g. 4KiB.
    #[arg(long)]
    pub min: Option<String>,
    /// A static shared limit instead of alpha, e.g. 1MB.
    #[arg(long = "static", conflicts_with = "unlimited")]
    pub static_limit: Option<String>,
    /// No shared limit (lossless queues).
    #[arg(long)]
    pub unlimited: bool,
    /// `strict` or `wdrr`.
    #[arg(long)]
    pub sched: Option<String>,
    /// WDRR weight.
    #[arg(long)]
    pub weight: Option<i64>,
    /// Shape the queue to this rate, e.g. 5G (with --shaper-burst).
    #[arg(long, requires = "shaper_burst")]
    pub shaper_rate: Option<String>,
    /// The shaper's bucket, e.g. 64KiB (with --shaper-rate).
    #[arg(long, requires = "shaper_rate")]
    pub shaper_burst: Option<String>,
    /// Remove the queue's shaper.
    #[arg(long, conflicts_with = "shaper_rate")]
    pub no_shaper: bool,
}

/// `rocectl set edf` (the subcommand's help is on [`Set::Edf`]).
#[derive(Args, Debug, Clone)]
pub struct Edf {
    /// Only on this port (its name, `Ethernet8`, or id): its own `edf` table, over the defaults.
    #[arg(long)]
    pub port: Option<String>,
    /// Also make EDF the scheduler (`scheduler = "edf"`) of every port (or of --port).
    #[arg(long)]
    pub enable: bool,
    /// `ideal`, `fifo2` or `take-over`.
    #[arg(long)]
    pub mode: Option<String>,
    /// A regulated queue and its delay budget, QUEUE=DURATION (e.g. 3=50us); repeatable.
    #[arg(long, value_name = "QUEUE=DURATION")]
    pub budget: Vec<String>,
    /// Stop regulating this queue (remove its budget); repeatable.
    #[arg(long, value_name = "QUEUE")]
    pub no_budget: Vec<u8>,
    /// A DSCP's delay budget, DSCP=DURATION (e.g. 24=20us); repeatable.
    #[arg(long, value_name = "DSCP=DURATION")]
    pub dscp_budget: Vec<String>,
    /// Remove a DSCP's budget; repeatable.
    #[arg(long, value_name = "DSCP")]
    pub no_dscp_budget: Vec<u8>,
    /// `off` or `flow_label`.
    #[arg(long)]
    pub tag: Option<String>,
    /// The tag's unit, e.g. 16ns.
    #[arg(long)]
    pub tag_unit: Option<String>,
}

/// `rocectl set policer` (the subcommand's help is on [`Set::Policer`]).
#[derive(Args, Debug, Clone)]
pub struct Policer {
    /// CNPs per port at most this rate, e.g. 2.5G (with --burst).
    #[arg(long, requires = "burst", required_unless_present = "off")]
    pub rate: Option<String>,
    /// The policer's bucket, e.g. 32KiB (with --rate).
    #[arg(long, requires = "rate")]
    pub burst: Option<String>,
    /// No policer on CNPs.
    #[arg(long, conflicts_with = "rate")]
    pub off: bool,
}

/// `rocectl set pfc` (the subcommand's help is on [`Set::Pfc`]).
#[derive(Args, Debug, Clone)]
pub struct Pfc {
    /// Lossless priorities, e.g. 3 or 3,4 (empty for none: --priorities '').
    #[arg(long, value_delimiter = ',')]
    pub priorities: Option<Vec<String>>,
    /// Pause time an XOFF asks for, in quanta of 512 bit times (1-65535).
    #[arg(long)]
    pub pause_quanta: Option<i64>,
    /// Resend XOFF after this fraction of the pause time.
    #[arg(long)]
    pub refresh: Option<f64>,
}

/// `rocectl set watchdog` (the subcommand's help is on [`Set::Watchdog`]).
#[derive(Args, Debug, Clone)]
pub struct Watchdog {
    /// Turn the watchdog on or off (true/false).
    #[arg(long)]
    pub enabled: Option<bool>,
    /// How long a queue must stay paused while holding frames to be a storm, e.g. 100ms.
    #[arg(long)]
    pub detection: Option<String>,
    /// How long without PFC before a stormed queue is restored, e.g. 200ms.
    #[arg(long)]
    pub restoration: Option<String>,
    /// `drop`, `forward` or `alert`.
    #[arg(long)]
    pub action: Option<String>,
}

/// `rocectl set scheduler` (the subcommand's help is on [`Set::Scheduler`]).
#[derive(Args, Debug, Clone)]
pub struct Scheduler {
    /// Only on this port (its name, `Ethernet8`, or id); otherwise [port_defaults].
    #[arg(long)]
    pub port: Option<String>,
    /// `sp_wdrr` (strict priority + WDRR by the queues' sched and weight), `vlarb`, or
    /// `edf` (its budgets: `rocectl set edf`).
    #[arg(long)]
    pub kind: Option<String>,
    /// The vlarb high-priority table as VL:WEIGHT pairs in order, e.g. 6:255,3:16 (VL 0-7 is
    /// queue 0-7; weight 0-255 in 64-byte units, 0 skips the entry); '' for none.
    #[arg(long, value_name = "VL:WEIGHT,...")]
    pub high: Option<String>,
    /// The vlarb low-priority table, likewise, e.g. 0:64,1:128.
    #[arg(long, value_name = "VL:WEIGHT,...")]
    pub low: Option<String>,
    /// LimitOfHighPriority: high-priority bytes (units of 4 KiB) sent while a low-priority
    /// packet waits; 0 = one packet at a time, 255 = unbounded.
    #[arg(long)]
    pub high_limit: Option<i64>,
}

/// `rocectl set dscp` (the subcommand's help is on [`Set::Dscp`]).
#[derive(Args, Debug, Clone)]
pub struct Dscp {
    /// `dscp`, `pcp` or `none`.
    #[arg(long)]
    pub trust: Option<String>,
    /// DSCP=TC, repeatable.
    #[arg(long, value_name = "DSCP=TC")]
    pub map: Vec<String>,
    /// Traffic class for frames the trusted field does not map (0-7).
    #[arg(long)]
    pub default_tc: Option<i64>,
    /// The map set (`[classify.map.NAME]`) whose DSCP map --map edits, instead of
    /// `[classify]`'s.
    #[arg(long, value_name = "NAME")]
    pub map_set: Option<String>,
}

/// A command-line value as the config would hold it: an integer, a float, or a string with a
/// unit or a fraction.
pub fn scalar(s: &str) -> Value {
    if let Ok(i) = s.parse::<i64>() {
        Value::Integer(i)
    } else if let Ok(f) = s.parse::<f64>() {
        Value::Float(f)
    } else {
        Value::String(s.to_string())
    }
}

/// `t[key]` as a table, created if missing.
fn table<'a>(t: &'a mut Table, key: &str) -> Result<&'a mut Table, String> {
    t.entry(key.to_string())
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| format!("`{key}` in the running config is not a table"))
}

/// The id of the port a `--port` names (`Ethernet8` or `8`) among the running config's
/// `[[port]]`s; an unknown one is an error listing them.
fn port_id(root: &Table, which: Option<&str>) -> Result<Option<u16>, String> {
    let Some(which) = which else { return Ok(None) };
    let ports: Vec<(u16, Option<&str>)> = root
        .get("port")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table)
        .filter_map(|p| {
            let id = u16::try_from(p.get("id")?.as_integer()?).ok()?;
            Some((id, p.get("name").and_then(Value::as_str)))
        })
        .collect();
    controlplane::model::find_port(&ports, which, "the switch").map(Some)
}

/// The `[[port]]` table with this id.
fn port(root: &mut Table, id: u16) -> Result<&mut Table, String> {
    root.get_mut("port")
        .and_then(Value::as_array_mut)
        .and_then(|ports| {
            ports
                .iter_mut()
                .filter_map(Value::as_table_mut)
                .find(|p| p.get("id").and_then(Value::as_integer) == Some(i64::from(id)))
        })
        .ok_or_else(|| format!("the switch has no port {id}"))
}

/// `[pg.N]` / `[queue.N]`, or port P's override of it.
fn numbered<'a>(root: &'a mut Table, on_port: Option<u16>, section: &str, n: u8) -> Result<&'a mut Table, String> {
    let parent = match on_port {
        Some(p) => port(root, p)?,
        None => root,
    };
    table(table(parent, section)?, &n.to_string())
}

/// Sets the shared limit to exactly one kind.
fn set_limit(t: &mut Table, key: &str, v: Value) {
    for k in ["alpha", "static", "dynamic_th", "unlimited"] {
        t.remove(k);
    }
    t.insert(key.into(), v);
}

fn put(t: &mut Table, key: &str, v: &Option<String>) {
    if let Some(v) = v {
        t.insert(key.into(), scalar(v));
    }
}

/// An OpenSM-style table, `VL:WEIGHT,VL:WEIGHT`, as the config's `[[VL, weight], ...]` (the
/// ranges are validation's to check, with the rest of the config).
fn vlarb_table(flag: &str, text: &str) -> Result<Value, String> {
    text.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.split_once(':')
                .and_then(|(vl, w)| Some((vl.trim().parse::<i64>().ok()?, w.trim().parse::<i64>().ok()?)))
                .map(|(vl, w)| Value::Array(vec![Value::Integer(vl), Value::Integer(w)]))
                .ok_or_else(|| format!("{flag} {e:?}: expected VL:WEIGHT pairs separated by commas, e.g. 0:16,6:255"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// Applies `set` to the running config's table. Refuses (before anything is sent) a command
/// that changes nothing or names what the config does not have.
pub fn edit(root: &mut Table, set: &Set) -> Result<(), String> {
    match set {
        Set::Ecn(knob) => knob.edit(root),
        Set::Alpha(knob) => knob.edit(root),
        Set::Pg(knob) => knob.edit(root),
        Set::Queue(knob) => knob.edit(root),
        Set::Edf(knob) => knob.edit(root),
        Set::Policer(knob) => knob.edit(root),
        Set::Pfc(knob) => knob.edit(root),
        Set::Watchdog(knob) => knob.edit(root),
        Set::Scheduler(knob) => knob.edit(root),
        Set::Dscp(knob) => knob.edit(root),
        Set::Port(knob) => knob.edit(root),
    }
}

/// A `set` that names no setting to change.
fn none(what: &str) -> Result<(), String> {
    Err(format!("set {what}: give at least one setting to change (see --help)"))
}

impl Ecn {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Ecn {
            profile,
            queue,
            port: port_arg,
            kmin,
            kmax,
            pmax,
            average,
            ewma_shift,
            mark_at,
            non_ect,
        } = self;
        let on_port = &port_id(root, port_arg.as_deref())?;
        let mut fields = Table::new();
        for (k, v) in [
            ("kmin", kmin),
            ("kmax", kmax),
            ("pmax", pmax),
            ("average", average),
            ("mark_at", mark_at),
            ("non_ect", non_ect),
        ] {
            put(&mut fields, k, v);
        }
        if let Some(s) = ewma_shift {
            fields.insert("ewma_shift".into(), Value::Integer(*s));
        }
        if fields.is_empty() {
            return none("ecn");
        }
        let name = match (profile, queue) {
            (Some(p), _) => p.clone(),
            (None, Some(q)) => {
                let global = root
                    .get("queue")
                    .and_then(|t| t.get(q.to_string()))
                    .and_then(|t| t.get("ecn"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                match on_port {
                    None => global.ok_or_else(|| format!("queue {q} has no ECN profile (set [queue.{q}] ecn)"))?,
                    Some(p) => {
                        let own = numbered(root, Some(*p), "queue", *q)?;
                        let current = own.get("ecn").and_then(Value::as_str).map(str::to_string).or(global);
                        let name = format!("port{p}-queue{q}");
                        let source = current.ok_or_else(|| format!("queue {q} has no ECN profile to start from"))?;
                        own.insert("ecn".into(), Value::String(name.clone()));
                        if source != name {
                            let copy = root
                                .get("ecn")
                                .and_then(|t| t.get(&source))
                                .cloned()
                                .ok_or_else(|| format!("no [ecn.{source}] in the running config"))?;
                            table(root, "ecn")?.insert(name.clone(), copy);
                        }
                        name
                    }
                }
            }
            (None, None) => return Err("set ecn: give --profile NAME or --queue N".into()),
        };
        let ecn = table(root, "ecn")?;
        if !ecn.contains_key(&name) {
            return Err(format!("there is no ECN profile {name:?} ([ecn.{name}])"));
        }
        let prof = table(ecn, &name)?;
        prof.extend(fields);
        Ok(())
    }
}

impl Alpha {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Alpha {
            port: port_arg,
            pg,
            queue,
            value,
        } = self;
        let on_port = &port_id(root, port_arg.as_deref())?;
        let (section, n) = match (pg, queue) {
            (Some(g), _) => ("pg", *g),
            (None, Some(q)) => ("queue", *q),
            (None, None) => return Err("set alpha: give --pg N or --queue N".into()),
        };
        set_limit(numbered(root, *on_port, section, n)?, "alpha", scalar(value));
        Ok(())
    }
}

impl Pg {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Pg {
            port: port_arg,
            pg,
            min,
            static_limit,
            headroom,
            xon_offset,
        } = self;
        let on_port = &port_id(root, port_arg.as_deref())?;
        if min.is_none() && static_limit.is_none() && headroom.is_none() && xon_offset.is_none() {
            return none("pg");
        }
        let t = numbered(root, *on_port, "pg", *pg)?;
        put(t, "min", min);
        put(t, "headroom", headroom);
        put(t, "xon_offset", xon_offset);
        if let Some(s) = static_limit {
            set_limit(t, "static", scalar(s));
        }
        Ok(())
    }
}

impl Queue {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Queue {
            port: port_arg,
            queue,
            min,
            static_limit,
            unlimited,
            sched,
            weight,
            shaper_rate,
            shaper_burst,
            no_shaper,
        } = self;
        let on_port = &port_id(root, port_arg.as_deref())?;
        let t = numbered(root, *on_port, "queue", *queue)?;
        let before = t.clone();
        put(t, "min", min);
        put(t, "sched", sched);
        if let Some(w) = weight {
            t.insert("weight".into(), Value::Integer(*w));
        }
        if let Some(s) = static_limit {
            set_limit(t, "static", scalar(s));
        }
        if *unlimited {
            set_limit(t, "unlimited", Value::Boolean(true));
        }
        if let (Some(r), Some(b)) = (shaper_rate, shaper_burst) {
            let mut sh = Table::new();
            sh.insert("rate".into(), scalar(r));
            sh.insert("burst".into(), scalar(b));
            t.insert("shaper".into(), Value::Table(sh));
        }
        if *no_shaper {
            t.remove("shaper");
        }
        if *t == before && !*no_shaper {
            return none("queue");
        }
        Ok(())
    }
}

impl Edf {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Edf {
            port: port_arg,
            enable,
            mode,
            budget,
            no_budget,
            dscp_budget,
            no_dscp_budget,
            tag,
            tag_unit,
        } = self;
        let on_port = &port_id(root, port_arg.as_deref())?;
        let parent = match on_port {
            Some(p) => port(root, *p)?,
            None => table(root, "port_defaults")?,
        };
        let before = parent.clone();
        if *enable {
            parent.insert("scheduler".into(), Value::String("edf".into()));
        }
        let t = table(parent, "edf")?;
        put(t, "mode", mode);
        put(t, "tag", tag);
        put(t, "tag_unit", tag_unit);
        for (key, adds, removes) in [
            ("budget", budget, no_budget),
            ("dscp_budget", dscp_budget, no_dscp_budget),
        ] {
            if adds.is_empty() && removes.is_empty() {
                continue;
            }
            let m = table(t, key)?;
            for a in adds {
                let (k, v) = a
                    .split_once('=')
                    .ok_or_else(|| format!("set edf --{}: {a:?} is not N=DURATION", key.replace('_', "-")))?;
                m.insert(k.trim().to_string(), Value::String(v.trim().to_string()));
            }
            for r in removes {
                m.remove(&r.to_string());
            }
        }
        if *parent == before {
            return none("edf");
        }
        Ok(())
    }
}

impl Policer {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Policer { rate, burst, off } = self;
        let cnp = table(root, "cnp")?;
        if *off {
            cnp.remove("policer");
        } else if let (Some(r), Some(b)) = (rate, burst) {
            let mut p = Table::new();
            p.insert("rate".into(), scalar(r));
            p.insert("burst".into(), scalar(b));
            cnp.insert("policer".into(), Value::Table(p));
        }
        Ok(())
    }
}

impl Pfc {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Pfc {
            priorities,
            pause_quanta,
            refresh,
        } = self;
        if priorities.is_none() && pause_quanta.is_none() && refresh.is_none() {
            return none("pfc");
        }
        let pfc = table(root, "pfc")?;
        if let Some(ps) = priorities {
            let list: Result<Vec<Value>, String> = ps
                .iter()
                .filter(|p| !p.trim().is_empty())
                .map(|p| {
                    p.trim()
                        .parse::<i64>()
                        .map(Value::Integer)
                        .map_err(|_| format!("--priorities: {p:?} is not a priority number"))
                })
                .collect();
            pfc.insert("priorities".into(), Value::Array(list?));
        }
        if let Some(q) = pause_quanta {
            pfc.insert("pause_quanta".into(), Value::Integer(*q));
        }
        if let Some(r) = refresh {
            pfc.insert("refresh".into(), Value::Float(*r));
        }
        Ok(())
    }
}

impl Watchdog {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Watchdog {
            enabled,
            detection,
            restoration,
            action,
        } = self;
        if enabled.is_none() && detection.is_none() && restoration.is_none() && action.is_none() {
            return none("watchdog");
        }
        let w = table(table(root, "pfc")?, "watchdog")?;
        if let Some(e) = enabled {
            w.insert("enabled".into(), Value::Boolean(*e));
        }
        put(w, "detection", detection);
        put(w, "restoration", restoration);
        put(w, "action", action);
        Ok(())
    }
}

impl Scheduler {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Scheduler {
            port: port_arg,
            kind,
            high,
            low,
            high_limit,
        } = self;
        let on_port = &port_id(root, port_arg.as_deref())?;
        if kind.is_none() && high.is_none() && low.is_none() && high_limit.is_none() {
            return none("scheduler");
        }
        let high = high.as_deref().map(|t| vlarb_table("--high", t)).transpose()?;
        let low = low.as_deref().map(|t| vlarb_table("--low", t)).transpose()?;
        let t = match on_port {
            Some(p) => port(root, *p)?,
            None => table(root, "port_defaults")?,
        };
        if let Some(k) = kind {
            t.insert("scheduler".into(), Value::String(k.clone()));
        }
        if high.is_some() || low.is_some() || high_limit.is_some() {
            let v = table(t, "vlarb")?;
            for (k, val) in [
                ("high", high),
                ("low", low),
                ("high_limit", high_limit.map(Value::Integer)),
            ] {
                if let Some(val) = val {
                    v.insert(k.into(), val);
                }
            }
        }
        Ok(())
    }
}

impl Dscp {
    fn edit(&self, root: &mut Table) -> Result<(), String> {
        let Dscp {
            trust,
            map,
            default_tc,
            map_set,
        } = self;
        if trust.is_none() && map.is_empty() && default_tc.is_none() {
            return none("dscp");
        }
        let c = table(root, "classify")?;
        if let Some(name) = map_set {
            if trust.is_some() || default_tc.is_some() {
                return Err("--map-set: --trust and --default-tc are the switch's, not a map set's".into());
            }
            let set = c
                .get_mut("map")
                .and_then(Value::as_table_mut)
                .and_then(|m| m.get_mut(name.as_str()))
                .and_then(Value::as_table_mut)
                .ok_or_else(|| format!("--map-set {name:?}: the running config has no [classify.map] of that name"))?;
            // A set without a DSCP map of its own classifies with [classify]'s: one entry
            // would replace the whole map, not change one value of it.
            let own = set.get_mut("dscp_to_tc").and_then(Value::as_table_mut).ok_or_else(|| {
                format!(
                    "--map-set {name:?}: it has no dscp_to_tc of its own (its ports use [classify]'s); give it one in the config first"
                )
            })?;
            for m in map {
                let (d, tc) = dscp_entry(m)?;
                own.insert(d.to_string(), Value::Integer(tc));
            }
            return Ok(());
        }
        put(c, "trust", trust);
        if let Some(d) = default_tc {
            c.insert("default_tc".into(), Value::Integer(*d));
        }
        for m in map {
            let (d, tc) = dscp_entry(m)?;
            table(c, "dscp_to_tc")?.insert(d.to_string(), Value::Integer(tc));
        }
        Ok(())
    }
}

/// A `--map DSCP=TC` (the ranges are validation's to check).
fn dscp_entry(m: &str) -> Result<(u8, i64), String> {
    m.split_once('=')
        .and_then(|(d, t)| Some((d.trim().parse::<u8>().ok()?, t.trim().parse::<i64>().ok()?)))
        .ok_or_else(|| format!("--map {m:?}: expected DSCP=TC, e.g. 26=3"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[[port]]
id = 0
[[port]]
id = 3
[pg.3]
static = "100KB"
[queue.3]
ecn = "roce"
[ecn.roce]
kmin = "100KB"
kmax = "400KB"
pmax = 0.2
"#;

    fn after(set: Set) -> Result<Table, String> {
        let mut t: Table = BASE.parse().unwrap();
        edit(&mut t, &set).map(|()| t)
    }

    /// `--map-set` edits the DSCP map of a map set that has one of its own, and refuses a set
    /// that classifies DSCP with `[classify]`'s (one entry would replace the whole map), or
    /// none of that name.
    #[test]
    fn dscp_edits_a_map_sets_own_map() {
        let base = format!(
            "{BASE}\n[classify.map.\"UP link\"]\ndscp_to_tc = {{ 2 = 1 }}\n[classify.map.PG]\ntc_to_pg = {{ 1 = 0 }}\n"
        );
        let run = |name: &str| {
            let mut t: Table = base.parse().unwrap();
            let set = Set::Dscp(Dscp {
                trust: None,
                map: vec!["6=1".into()],
                default_tc: None,
                map_set: Some(name.into()),
            });
            edit(&mut t, &set).map(|()| t)
        };
        let t = run("UP link").unwrap();
        let own = &t["classify"]["map"]["UP link"]["dscp_to_tc"];
        assert_eq!((own["2"].as_integer(), own["6"].as_integer()), (Some(1), Some(1)));
        assert!(t["classify"].get("dscp_to_tc").is_none(), "[classify]'s map untouched");
        assert!(run("PG").unwrap_err().contains("no dscp_to_tc of its own"));
        assert!(run("nope").unwrap_err().contains("no [classify.map]"));
    }

    fn ecn(profile: Option<&str>, queue: Option<u8>, port: Option<u16>, kmax: &str) -> Set {
        Set::Ecn(Ecn {
            profile: profile.map(Into::into),
            queue,
            port: port.map(|p| p.to_string()),
            kmin: None,
            kmax: Some(kmax.into()),
            pmax: Some("0.1".into()),
            average: None,
            ewma_shift: None,
            mark_at: None,
            non_ect: None,
        })
    }

    #[test]
    fn ecn_by_profile_queue_and_port() {
        let t = after(ecn(Some("roce"), None, None, "200KB")).unwrap();
        assert_eq!(t["ecn"]["roce"]["kmax"].as_str(), Some("200KB"));
        assert_eq!(t["ecn"]["roce"]["pmax"].as_float(), Some(0.1));
        assert_eq!(t["ecn"]["roce"]["kmin"].as_str(), Some("100KB"), "untouched");
        let t = after(ecn(None, Some(3), None, "300KB")).unwrap();
        assert_eq!(t["ecn"]["roce"]["kmax"].as_str(), Some("300KB"));
        // One port: its queue gets its own profile, copied; the global one stays.
        let t = after(ecn(None, Some(3), Some(3), "50KB")).unwrap();
        let p3 = t["port"].as_array().unwrap()[1].as_table().unwrap();
        assert_eq!(p3["queue"]["3"]["ecn"].as_str(), Some("port3-queue3"));
        assert_eq!(t["ecn"]["port3-queue3"]["kmax"].as_str(), Some("50KB"));
        assert_eq!(t["ecn"]["port3-queue3"]["kmin"].as_str(), Some("100KB"));
        assert_eq!(t["ecn"]["roce"]["kmax"].as_str(), Some("400KB"));
        assert!(t["port"].as_array().unwrap()[0].get("queue").is_none());
        assert!(after(ecn(Some("nope"), None, None, "1KB"))
            .unwrap_err()
            .contains("nope"));
        assert!(after(ecn(None, Some(3), Some(9), "1KB"))
            .unwrap_err()
            .contains("\"9\" is not a port of the switch (ports: 0, 3)"));
        assert!(after(ecn(None, Some(0), None, "1KB"))
            .unwrap_err()
            .contains("no ECN profile"));
    }

    /// Issue 23 item 7: `rocectl set ecn --kmin 50k` (refused before: `"50k" is not a size`)
    /// means what the config's parser says, 50 KiB; a bare number is bytes; both through the
    /// one parser config files use.
    #[test]
    fn sizes_take_the_suffixes_users_type() {
        let kmin_of = |kmin: &str| -> Result<u64, String> {
            let mut t: Table = controlplane::DEFAULT_PROFILE.parse().unwrap();
            let mut set = ecn(Some("roce"), None, None, "1MiB");
            if let Set::Ecn(Ecn { kmin: k, .. }) = &mut set {
                *k = Some(kmin.into());
            }
            edit(&mut t, &set)?;
            let loaded = controlplane::load_str(&toml::to_string(&t).unwrap()).map_err(|e| e.to_string())?;
            Ok(loaded.config.queues[3].ecn.as_ref().unwrap().kmin_bytes)
        };
        assert_eq!(kmin_of("50k"), Ok(51_200));
        assert_eq!(kmin_of("50KB"), Ok(50_000));
        assert_eq!(kmin_of("50KiB"), Ok(51_200));
        assert_eq!(kmin_of("5000"), Ok(5000));
        let e = kmin_of("50kbit").unwrap_err();
        assert!(e.contains("not bits"), "{e}");
    }

    /// `--port` by name, as a config imported from SONiC names its ports; by id still; an
    /// unknown name is refused listing the ports with their names.
    #[test]
    fn a_port_is_named_by_its_name_or_its_id() {
        let named = "[[port]]\nid = 0\nname = \"Ethernet0\"\n[[port]]\nid = 8\nname = \"Ethernet8\"\n";
        let alpha = |port: &str| {
            Set::Alpha(Alpha {
                port: Some(port.into()),
                pg: Some(3),
                queue: None,
                value: "1/4".into(),
            })
        };
        for which in ["Ethernet8", "8"] {
            let mut t: Table = named.parse().unwrap();
            edit(&mut t, &alpha(which)).unwrap();
            assert_eq!(t["port"][1]["pg"]["3"]["alpha"].as_str(), Some("1/4"), "{which}");
            assert!(t["port"][0].get("pg").is_none(), "{which}: Ethernet0 untouched");
        }
        let mut t: Table = named.parse().unwrap();
        let e = edit(&mut t, &alpha("Ethernet9")).unwrap_err();
        assert!(
            e.contains("\"Ethernet9\" is not a port of the switch (ports: 0 (Ethernet0), 8 (Ethernet8))"),
            "{e}"
        );
        assert_eq!(t, named.parse::<Table>().unwrap(), "nothing changed");
    }

    #[test]
    fn limits_are_one_kind() {
        let t = after(Set::Alpha(Alpha {
            port: None,
            pg: Some(3),
            queue: None,
            value: "1/4".into(),
        }))
        .unwrap();
        assert_eq!(t["pg"]["3"]["alpha"].as_str(), Some("1/4"));
        assert!(t["pg"]["3"].get("static").is_none(), "alpha replaced the static limit");
        let t = after(Set::Alpha(Alpha {
            port: Some("0".into()),
            pg: Some(3),
            queue: None,
            value: "1".into(),
        }))
        .unwrap();
        assert_eq!(t["port"][0]["pg"]["3"]["alpha"].as_integer(), Some(1));
        assert_eq!(t["pg"]["3"]["static"].as_str(), Some("100KB"), "global untouched");
    }

    #[test]
    fn scheduler_kind_and_vlarb_tables() {
        let set = |port: Option<u16>, kind: Option<&str>, high: Option<&str>, low: Option<&str>, limit: Option<i64>| {
            Set::Scheduler(Scheduler {
                port: port.map(|p| p.to_string()),
                kind: kind.map(Into::into),
                high: high.map(Into::into),
                low: low.map(Into::into),
                high_limit: limit,
            })
        };
        let t = after(set(
            None,
            Some("vlarb"),
            Some("6:255, 3:16"),
            Some("0:64,1:128"),
            Some(6),
        ))
        .unwrap();
        let d = &t["port_defaults"];
        assert_eq!(d["scheduler"].as_str(), Some("vlarb"));
        assert_eq!(d["vlarb"]["high"].to_string(), "[[6, 255], [3, 16]]");
        assert_eq!(d["vlarb"]["low"].to_string(), "[[0, 64], [1, 128]]");
        assert_eq!(d["vlarb"]["high_limit"].as_integer(), Some(6));
        // One port, one field: the rest stays as it was (the defaults).
        let t = after(set(Some(3), None, None, Some(""), None)).unwrap();
        assert_eq!(t["port"][1]["vlarb"]["low"].to_string(), "[]");
        assert!(t["port"][1].get("scheduler").is_none());
        assert!(t.get("port_defaults").is_none());
        assert!(after(set(None, None, Some("0-16"), None, None))
            .unwrap_err()
            .contains("VL:WEIGHT"));
        assert!(after(set(None, None, None, None, None))
            .unwrap_err()
            .contains("at least one"));
        assert!(after(set(Some(9), Some("vlarb"), None, None, None))
            .unwrap_err()
            .contains("\"9\" is not a port of the switch (ports: 0, 3)"));
    }

    #[test]
    fn edf_settings_globally_and_per_port() {
        let t = after(Set::Edf(Edf {
            port: None,
            enable: true,
            mode: Some("fifo2".into()),
            budget: vec!["3=50us".into(), "5 = 1ms".into()],
            no_budget: vec![],
            dscp_budget: vec!["24=20us".into()],
            no_dscp_budget: vec![],
            tag: None,
            tag_unit: None,
        }))
        .unwrap();
        let d = &t["port_defaults"];
        assert_eq!(d["scheduler"].as_str(), Some("edf"));
        assert_eq!(d["edf"]["mode"].as_str(), Some("fifo2"));
        assert_eq!(d["edf"]["budget"]["3"].as_str(), Some("50us"));
        assert_eq!(d["edf"]["budget"]["5"].as_str(), Some("1ms"));
        assert_eq!(d["edf"]["dscp_budget"]["24"].as_str(), Some("20us"));
        let edf = |port: Option<u16>, no_budget: Vec<u8>, budget: Vec<String>| {
            Set::Edf(Edf {
                port: port.map(|p| p.to_string()),
                enable: false,
                mode: None,
                budget,
                no_budget,
                dscp_budget: vec![],
                no_dscp_budget: vec![],
                tag: Some("flow_label".into()),
                tag_unit: None,
            })
        };
        let t = after(edf(Some(3), vec![], vec!["2=10us".into()])).unwrap();
        let p3 = t["port"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"].as_integer() == Some(3))
            .unwrap();
        assert_eq!(p3["edf"]["budget"]["2"].as_str(), Some("10us"));
        assert_eq!(p3["edf"]["tag"].as_str(), Some("flow_label"));
        assert!(t.get("port_defaults").is_none(), "only port 3's own table");
        assert!(after(edf(Some(99), vec![], vec![]))
            .unwrap_err()
            .contains("\"99\" is not a port of the switch"));
        assert!(after(edf(None, vec![], vec!["3:50us".into()]))
            .unwrap_err()
            .contains("not N=DURATION"));
    }

    #[test]
    fn other_knobs() {
        let t = after(Set::Pfc(Pfc {
            priorities: Some(vec!["3".into(), "4".into()]),
            pause_quanta: None,
            refresh: Some(0.25),
        }))
        .unwrap();
        assert_eq!(t["pfc"]["priorities"].as_array().unwrap().len(), 2);
        let t = after(Set::Dscp(Dscp {
            trust: None,
            map: vec!["46=5".into()],
            default_tc: None,
            map_set: None,
        }))
        .unwrap();
        assert_eq!(t["classify"]["dscp_to_tc"]["46"].as_integer(), Some(5));
        assert!(after(Set::Dscp(Dscp {
            trust: None,
            map: vec!["x".into()],
            default_tc: None,
            map_set: None,
        }))
        .unwrap_err()
        .contains("DSCP=TC"));
        let t = after(Set::Queue(Queue {
            port: Some("3".into()),
            queue: 1,
            min: None,
            static_limit: None,
            unlimited: false,
            sched: None,
            weight: Some(4),
            shaper_rate: Some("5G".into()),
            shaper_burst: Some("64KiB".into()),
            no_shaper: false,
        }))
        .unwrap();
        assert_eq!(t["port"][1]["queue"]["1"]["shaper"]["rate"].as_str(), Some("5G"));
        assert!(after(Set::Watchdog(Watchdog {
            enabled: None,
            detection: None,
            restoration: None,
            action: None
        }))
        .unwrap_err()
        .contains("at least one"));
    }

    /// `set port P tx off|on`: the port found by id or by name, the rest left alone.
    #[test]
    fn a_ports_transmit_is_set_by_id_or_name() {
        let knob = |port: &str, value: &str| {
            Set::Port(PortKnob {
                port: port.into(),
                setting: "tx".into(),
                value: value.into(),
            })
        };
        let t = after(knob("3", "off")).unwrap();
        let ports = t["port"].as_array().unwrap();
        assert_eq!(ports[1]["tx"].as_str(), Some("off"));
        assert!(ports[0].get("tx").is_none());
        let mut named: Table = BASE.replace("id = 3", "id = 3\nname = \"Ethernet12\"").parse().unwrap();
        edit(&mut named, &knob("Ethernet12", "on")).unwrap();
        assert_eq!(named["port"].as_array().unwrap()[1]["tx"].as_str(), Some("on"));
        let e = after(knob("Ethernet9", "off")).unwrap_err();
        assert!(e.contains("no port \"Ethernet9\" (ports: 0, 3)"), "{e}");
        // What it writes validates: the schema knows the key.
        let text = format!("{}\n[[port]]\nid = 1\nspeed = \"25G\"\ntx = \"off\"\n", "");
        assert!(controlplane::load_str(&text).is_ok());
    }
}
