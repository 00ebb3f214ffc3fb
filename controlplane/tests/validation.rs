//! One test per class of problem: each asserts the message names the field and the reason,
//! and that problems are collected rather than reported one at a time.

use controlplane::{load_str, ConfigErrorKind, Loaded, SchedMode, Threshold};

/// A small valid lossless config the tests edit.
const BASE: &str = r#"
[port_defaults]
speed = "25G"

[[port]]
id = 0
[[port]]
id = 1

[classify]
dscp_to_tc = { 26 = 3, 48 = 6 }

[pfc]
priorities = [3]

[queue.3]
ecn = "roce"

[ecn.roce]
kmin = "100KB"
kmax = "400KB"
pmax = 0.2
"#;

fn ok(text: &str) -> Loaded {
    load_str(text).unwrap_or_else(|e| panic!("should load:\n{e}"))
}

/// Loads `text`, expects it to be invalid, and returns every problem.
fn problems(text: &str) -> Vec<String> {
    match load_str(text) {
        Ok(l) => panic!("should fail, loaded with warnings {:?}", l.warnings),
        Err(e) => {
            assert_eq!(e.kind(), ConfigErrorKind::Invalid, "{e}");
            assert_eq!(e.to_string(), e.problems().join("\n"));
            e.problems().to_vec()
        }
    }
}

fn has(list: &[String], needles: &[&str]) {
    assert!(
        list.iter().any(|p| needles.iter().all(|n| p.contains(n))),
        "no entry contains all of {needles:?} in {list:#?}"
    );
}

fn with(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

#[test]
fn base_is_valid_and_quiet() {
    let l = ok(BASE);
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    let c = l.config;
    assert!(c.pgs[3].lossless);
    assert_eq!(c.queues[3].shared, Threshold::Unlimited);
    assert_eq!(c.queues[6].sched, SchedMode::Strict, "the CNP queue defaults to strict");
    assert_eq!(c.ports[1].cable_m, 15.0);
    assert_eq!(c.ports[1].max_frame_bytes, 1518);
}

#[test]
fn syntax_and_unknown_keys_carry_line_and_column() {
    let e = load_str("[buffer]\nsize = \n").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    assert!(e.to_string().contains("line 2"), "{e}");

    let e = load_str(&BASE.replace("kmin =", "kmni =")).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Syntax);
    assert!(e.to_string().contains("kmni"), "{e}");
    assert!(e.to_string().contains("line"), "{e}");

    let e = load_str("[[port]]\nid = 0\nspeed = \"25G\"\nbackend = \"afpacket\"\n").unwrap_err();
    assert!(e.to_string().contains("backend"), "{e}");
}

#[test]
fn bad_units_name_field_and_text() {
    let p = problems(&with("[buffer]\nsize = \"4XB\"\ncell = \"5000B\""));
    has(&p, &[r#"buffer.size: "4XB" is not a size (try 4MiB or 4MB)"#]);
    has(&p, &["buffer.cell (5000B)", "from 64B to 4096B"]);
}

#[test]
fn all_problems_are_collected() {
    let text = BASE
        .replace("speed = \"25G\"", "speed = \"25X\"")
        .replace("pmax = 0.2", "pmax = 1.5")
        .replace("kmin = \"100KB\"", "kmin = \"500KB\"");
    let p = problems(&text);
    has(&p, &["port_defaults.speed", "\"25X\" is not a rate"]);
    has(&p, &["ecn.roce.pmax (1.5)", "0 to 1"]);
    has(&p, &["ecn.roce.kmin (500KB) is above kmax (400KB)"]);
    assert_eq!(p.len(), 3, "{p:#?}");
}

#[test]
fn kmin_above_kmax_echoes_the_user_text() {
    let p = problems(
        &BASE
            .replace("\"100KB\"", "\"400KiB\"")
            .replace("\"400KB\"", "\"200KiB\""),
    );
    has(&p, &["ecn.roce.kmin (400KiB) is above kmax (200KiB)"]);
}

#[test]
fn ecn_ewma_rules() {
    let p = problems(&BASE.replace("pmax = 0.2", "pmax = 0.2\newma_shift = 16"));
    has(&p, &["ecn.roce.ewma_shift", "0..=15"]);
    let p = problems(&BASE.replace("pmax = 0.2", "pmax = 0.2\naverage = \"instant\"\newma_shift = 3"));
    has(&p, &["ecn.roce.ewma_shift", "instant"]);
    let p = problems(&BASE.replace("pmax = 0.2", "pmax = 0.2\naverage = \"ewma\""));
    has(&p, &["ecn.roce.average", "ewma_shift"]);
    let p = problems(&BASE.replace("pmax = 0.2", "pmax = 0.2\nmark_at = \"middle\""));
    has(&p, &["ecn.roce.mark_at", "\"middle\" is not one of dequeue, enqueue"]);
    let c = ok(&BASE.replace("pmax = 0.2", "pmax = 0.2\newma_shift = 4\nmark_at = \"enqueue\"")).config;
    assert_eq!(c.queues[3].ecn.as_ref().unwrap().ewma_shift, Some(4));
}

#[test]
fn unknown_ecn_profile_names_both() {
    let p = problems(&BASE.replace("ecn = \"roce\"", "ecn = \"rocee\""));
    has(&p, &["queue.3.ecn", "\"rocee\"", "ecn.rocee", "defined: roce"]);
}

/// Issue 46 item 5: a port named like another port's id (`1` on port 0, next to port id 1)
/// is refused, naming both; the same in any spelling the port lookups read as that id; a name
/// that is its own port's id, or an id no port has, stays valid.
#[test]
fn a_port_named_like_another_ports_id_is_refused() {
    for name in ["1", " 1", "01", "+1"] {
        let text = BASE.replacen("[[port]]\nid = 0", &format!("[[port]]\nid = 0\nname = {name:?}"), 1);
        let p = problems(&text);
        has(
            &p,
            &[
                &format!("port[0].name: {name:?} is the id of port[1] (1)"),
                "may not be another port's id",
                "\"Ethernet0\"",
            ],
        );
    }
    // Its own id, or an id no port has: one port either way.
    ok(&BASE.replacen("[[port]]\nid = 1", "[[port]]\nid = 1\nname = \"1\"", 1));
    ok(&BASE.replacen("[[port]]\nid = 0", "[[port]]\nid = 0\nname = \"8\"", 1));
    // The lookup that made it matter: by name first.
    let ports = [(0u16, Some("8")), (8, None)];
    assert_eq!(controlplane::model::find_port(&ports, "8", "the config"), Ok(0));
}

#[test]
fn ports_ids_count_speed_mtu_cable() {
    let p = problems(&BASE.replace("[[port]]\nid = 1", "[[port]]\nid = 0"));
    has(&p, &["port[1].id: 0 is already used by port[0]"]);

    let p = problems("[buffer]\nsize = \"4MiB\"\n");
    has(&p, &["port: at least one [[port]] is required"]);

    let many: String = (0..513)
        .map(|i| format!("[[port]]\nid = {i}\nspeed = \"10G\"\n"))
        .collect();
    has(&problems(&many), &["513 ports", "at most 512"]);

    let p = problems("[[port]]\nid = 70000\nspeed = \"0G\"\nmtu = 9217\ncable = \"-1m\"\n[[port]]\nid = 1\n");
    has(&p, &["port[0].id: 70000 is out of range 0..=65535"]);
    has(&p, &["port[0].speed (0G) must be above 0"]);
    has(&p, &["port[0].mtu: 9217 is out of range 68..=9216"]);
    has(&p, &["port[0].cable", "\"-1m\" is not a length"]);
    has(&p, &["port[1].speed: missing"]);
}

/// A port slower than 10 Mb/s (the slowest Ethernet) is refused, naming the port: 1 b/s and
/// 10 b/s validated before and dropped thousands of lossless frames in replay.
#[test]
fn port_speed_has_a_minimum() {
    for (speed, shown) in [
        ("1", "1"),
        ("10", "10"),
        ("\"9999999bps\"", "9999999bps"),
        ("\"1M\"", "1M"),
    ] {
        let p = problems(&BASE.replace("id = 1\n", &format!("id = 1\nspeed = {speed}\n")));
        has(
            &p,
            &[&format!(
                "port[1].speed ({shown}) is below the minimum port speed of 10M"
            )],
        );
        let p = problems(&BASE.replace("speed = \"25G\"", &format!("speed = {speed}")));
        has(
            &p,
            &[&format!(
                "port_defaults.speed ({shown}) is below the minimum port speed of 10M"
            )],
        );
    }
    let l = ok(&BASE.replace("id = 1\n", "id = 1\nspeed = \"10M\"\n"));
    assert_eq!(l.config.ports[1].speed_bps, 10_000_000);
}

/// `[classify.map.NAME]` and `[[port]] classify`: a port classifies with its set's maps (each
/// map the set gives is whole; the rest `[classify]`'s), and every mistake is named.
#[test]
fn map_sets() {
    let set = "[classify.map.\"up link\"]\ndscp_to_tc = { 26 = 1 }\n";
    let l = ok(&BASE
        .replace("id = 1\n", "id = 1\nclassify = \"up link\"\n")
        .replace("[pfc]", &format!("{set}\n[pfc]")));
    let c = &l.config;
    assert_eq!(c.classify.sets.len(), 1);
    assert_eq!((c.ports[0].map_set, c.ports[1].map_set), (None, Some(0)));
    assert_eq!(c.port_maps(0).dscp_to_tc[26], 3);
    assert_eq!(c.port_maps(1).dscp_to_tc[26], 1);
    // The set's map is whole: DSCP 48 takes default_tc there, not [classify]'s 6.
    assert_eq!((c.port_maps(0).dscp_to_tc[48], c.port_maps(1).dscp_to_tc[48]), (6, 0));
    // Maps the set does not give are [classify]'s.
    assert_eq!(c.port_maps(1).tc_to_pg, &c.classify.tc_to_pg);

    let p = problems(
        &with(
            "[classify.map.a]\ndscp_to_tc = { 64 = 1 }\ntc_to_pg = { 3 = 9 }\ntc_to_queue = { 3 = 3 }\n\
         [classify.map.b]\ntc_to_pg = { 0 = 3 }\n",
        )
        .replace("id = 0\n", "id = 0\nclassify = \"nope\"\n")
        .replace("id = 1\n", "id = 1\nclassify = \"b\"\n"),
    );
    has(&p, &["classify.map.a.dscp_to_tc.64", "DSCP 64 is out of range"]);
    has(&p, &["classify.map.a.tc_to_pg.3", "9"]);
    has(&p, &["classify.map.a.tc_to_queue", "the queue map is the switch's"]);
    has(
        &p,
        &[
            "classify.map.b.tc_to_pg",
            "lossy tc 0 and lossless priority 3 both map to PG 3",
        ],
    );
    has(&p, &["port[0].classify", "\"nope\" is not a map set", "\"a\", \"b\""]);

    // A set no port names is said.
    let l = ok(&BASE.replace("[pfc]", &format!("{set}\n[pfc]")));
    assert!(
        l.warnings
            .iter()
            .any(|w| w.contains("classify.map.\"up link\": no port classifies with it")),
        "{:?}",
        l.warnings
    );
}

#[test]
fn map_ranges() {
    let p = problems(&BASE.replace(
        "dscp_to_tc = { 26 = 3, 48 = 6 }",
        "dscp_to_tc = { 64 = 3, 26 = 9 }\npcp_to_tc = { 8 = 1 }\ntc_to_queue = { x = 1 }\ndefault_tc = 8",
    ));
    has(&p, &["classify.dscp_to_tc.64", "DSCP 64 is out of range 0..=63"]);
    has(&p, &["classify.dscp_to_tc.26", "tc 9 is out of range 0..=7"]);
    has(&p, &["classify.pcp_to_tc.8", "PCP 8"]);
    has(&p, &["classify.tc_to_queue.x", "not a tc number"]);
    has(&p, &["classify.default_tc", "tc 8"]);
}

#[test]
fn rules_are_range_checked() {
    let p = problems(&with(
        r#"
[[classify.rule]]
name = "bad"
match = { dscp = 64, udp_dport = 70000, in_port = 9, pcp = 8 }
action = { queue = 8, set_dscp = 64 }
[[classify.rule]]
name = "noop"
match = { roce = true }
"#,
    ));
    has(&p, &["classify.rule[0].match.dscp", "64"]);
    has(&p, &["classify.rule[0].match.udp_dport", "70000"]);
    has(&p, &["classify.rule[0].match.in_port", "no port with id 9"]);
    has(&p, &["classify.rule[0].match.pcp"]);
    has(&p, &["classify.rule[0].action.queue", "queue 8"]);
    has(&p, &["classify.rule[0].action.set_dscp", "64"]);
    has(&p, &["classify.rule[1].action", "does nothing", "noop"]);
}

#[test]
fn rules_resolve_and_unreachable_rules_warn() {
    let l = ok(&with(
        r#"
[[classify.rule]]
name = "roce-cnp-dscp48"
match = { udp_dport = 4791, dscp = 48 }
action = { queue = 6 }
[[classify.rule]]
name = "default"
match = {}
action = { set_dscp = 0, tc = 0 }
[[classify.rule]]
name = "late"
match = { pcp = 1 }
action = { tc = 1 }
"#,
    ));
    let r = &l.config.classify.rules;
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].matches.udp_dport, Some(4791));
    assert_eq!(r[0].action.queue, Some(6));
    assert_eq!(r[1].action.set_dscp, Some(0));
    has(&l.warnings, &["classify.rule[2]", "never reached", "classify.rule[1]"]);
}

#[test]
fn cnp_queue_and_policer() {
    let p = problems(&with("[cnp]\nqueue = 8\npolicer = { rate = \"0G\", burst = \"10B\" }"));
    has(&p, &["cnp.queue", "queue 8"]);
    has(&p, &["cnp.policer.rate (0G) must be above 0"]);
    has(&p, &["cnp.policer.burst (10B)", "at least 64B"]);

    let l = ok(&with("[cnp]\nqueue = 5\n[queue.5]\nsched = \"wdrr\""));
    has(&l.warnings, &["cnp.queue", "not strict"]);
}

/// A CNP policer at or above a port's speed never limits CNPs there (each port polices its
/// own): a warning names the ports. Before, a 1.25G policer on 1G ports loaded silently and
/// 1400 B "CNPs" starved an incast.
#[test]
fn a_cnp_policer_not_below_a_port_speed_warns() {
    let text = BASE.replace("id = 1\n", "id = 1\nspeed = \"1G\"\n[[port]]\nid = 2\nspeed = \"1G\"\n");
    let l = ok(&format!(
        "{text}\n[cnp]\npolicer = {{ rate = \"1.25G\", burst = \"16KiB\" }}"
    ));
    has(
        &l.warnings,
        &[
            "cnp.policer.rate (1250M) is not below the speed of port 1 (1G), port 2 (1G)",
            "never limits",
        ],
    );
    assert!(!l.warnings.iter().any(|w| w.contains("port 0 (")), "{:?}", l.warnings);
    let l = ok(&format!(
        "{text}\n[cnp]\npolicer = {{ rate = \"1G\", burst = \"16KiB\" }}"
    ));
    has(
        &l.warnings,
        &["cnp.policer.rate (1G) is not below the speed of port 1 (1G)"],
    );
    let l = ok(&format!(
        "{text}\n[cnp]\npolicer = {{ rate = \"50M\", burst = \"16KiB\" }}"
    ));
    assert!(
        !l.warnings.iter().any(|w| w.contains("cnp.policer")),
        "{:?}",
        l.warnings
    );
}

#[test]
fn pfc_settings() {
    let p = problems(&BASE.replace(
        "priorities = [3]",
        "priorities = [3, 9]\npause_quanta = 0\nrefresh = 1.0\n\
         watchdog = { detection = \"0ms\", restoration = \"200\", action = \"panic\" }",
    ));
    has(&p, &["pfc.priorities[1]", "priority 9"]);
    has(&p, &["pfc.pause_quanta: 0 is out of range 1..=65535"]);
    has(&p, &["pfc.refresh (1)", "between 0 and 1"]);
    has(&p, &["pfc.watchdog.detection (0ms) must be above 0"]);
    has(&p, &["pfc.watchdog.restoration", "\"200\" is not a duration"]);
    has(&p, &["pfc.watchdog.action", "\"panic\""]);

    let l = ok(&BASE.replace(
        "priorities = [3]",
        "priorities = [3]\nwatchdog = { detection = \"400ms\", restoration = \"100ms\" }",
    ));
    has(
        &l.warnings,
        &["pfc.watchdog.restoration (100ms) is shorter than detection (400ms)"],
    );
    let wd = l.config.pfc.watchdog.unwrap();
    assert_eq!(wd.detection_ns, 400_000_000);

    let l = ok(&BASE.replace("priorities = [3]", "priorities = [3]\nwatchdog = { enabled = false }"));
    assert!(l.config.pfc.watchdog.is_none());
}

#[test]
fn pg_mixing_lossless_and_lossy_is_an_error() {
    let p = problems(&BASE.replace("dscp_to_tc = { 26 = 3, 48 = 6 }", "tc_to_pg = { 4 = 3 }"));
    has(&p, &["classify.tc_to_pg", "lossy tc 4", "lossless priority 3", "PG 3"]);
}

#[test]
fn lossless_queue_mixed_with_lossy_tc_is_an_error() {
    let p = problems(&BASE.replace("dscp_to_tc = { 26 = 3, 48 = 6 }", "tc_to_queue = { 0 = 3 }"));
    has(
        &p,
        &["classify.tc_to_queue", "lossy tc 0", "lossless priority 3", "queue 3"],
    );
}

#[test]
fn headroom_on_a_lossy_pg_is_an_error() {
    let p = problems(&with("[pg.0]\nheadroom = \"10KiB\""));
    has(&p, &["pg.0.headroom", "lossy"]);
}

#[test]
fn lossless_pg_needs_a_limit() {
    let p = problems(&with("[pg.3]\nunlimited = true"));
    has(&p, &["pg.3", "lossless", "XOFF"]);
}

#[test]
fn limits_are_exclusive_and_resolve() {
    let p = problems(&with(
        "[pg.3]\nalpha = 0.5\nstatic = \"100KiB\"\n[queue.0]\nunlimited = false",
    ));
    has(&p, &["pg.3: give only one of", "alpha and static"]);
    has(&p, &["queue.0.unlimited: false is not a limit"]);

    let c = ok(&with(
        "[pg.3]\ndynamic_th = -3\n[queue.0]\nstatic = \"200KiB\"\n[queue.1]\ndynamic_th = 7\n\
         [queue.2]\ndynamic_th = -8\n[queue.4]\nalpha = \"1/4\"",
    ))
    .config;
    assert_eq!(c.pgs[3].shared, Threshold::Dynamic { alpha: 0.125 });
    assert_eq!(c.queues[0].shared, Threshold::Static { bytes: 204_800 });
    assert_eq!(c.queues[1].shared, Threshold::Unlimited);
    assert_eq!(c.queues[2].shared, Threshold::Dynamic { alpha: 0.0 });
    assert_eq!(c.queues[4].shared, Threshold::Dynamic { alpha: 0.25 });
}

#[test]
fn pg_and_queue_keys_are_checked() {
    let p = problems(&with(
        "[pg.8]\nmin = \"1KiB\"\n[queue.abc]\nmin = 0\n[pg.03]\nmin = 0\n[pg.3]\nmin = 0",
    ));
    has(&p, &["pg.8", "PG 8 is out of range 0..=7"]);
    has(&p, &["queue.abc", "not a queue number"]);
    has(&p, &["pg.3", "already configured as pg.03"]);
}

#[test]
fn queue_sched_weight_and_shaper() {
    let p = problems(&with(
        "[queue.0]\nsched = \"fifo\"\nweight = 0\nshaper = { rate = \"10G\", burst = \"1KiB\" }",
    ));
    has(&p, &["queue.0.sched", "\"fifo\" is not one of strict, wdrr"]);
    has(&p, &["queue.0.weight: 0 is out of range 1..=1000"]);
    has(&p, &["queue.0.shaper.burst (1KiB)", "max frame"]);

    let l = ok(&with(
        "[queue.0]\nsched = \"strict\"\nweight = 3\nshaper = { rate = \"25G\", burst = \"16KiB\" }",
    ));
    has(&l.warnings, &["queue.0.weight: ignored"]);
    has(&l.warnings, &["queue.0.shaper.rate (25G)", "never limits"]);
}

#[test]
fn buffer_budget_overrun_says_how_many_cells() {
    // 2 ports × 8 PGs × 64 KiB minimum = 1 MiB = 4096 cells, + headroom 200, in 2048 cells.
    let p = problems(&with(
        "[buffer]\nsize = \"512KiB\"\n[pg.0]\nmin = \"64KiB\"\n[pg.1]\nmin = \"64KiB\"\n[pg.2]\nmin = \"64KiB\"\n\
         [pg.4]\nmin = \"64KiB\"\n[pg.5]\nmin = \"64KiB\"\n[pg.6]\nmin = \"64KiB\"\n[pg.7]\nmin = \"64KiB\"\n\
         [pg.3]\nmin = \"64KiB\"",
    ));
    has(
        &p,
        &[
            "buffer.size (512KiB = 2048 cells of 256B) is 2248 cells short",
            "headroom 200",
        ],
    );
}

#[test]
fn tiny_buffer_is_an_error() {
    let p = problems(&with("[buffer]\nsize = \"8KiB\""));
    has(&p, &["buffer.size (8KiB) is below the minimum of 64 cells"]);
}

#[test]
fn ucloud_check_warns_when_a_lossless_queue_is_limited() {
    let l = ok(&BASE.replace("ecn = \"roce\"", "ecn = \"roce\"\nstatic = \"64KiB\""));
    has(&l.warnings, &["queue.3", "lossless PG 3", "make queue.3 unlimited"]);
    // Issue 46 item 7: what it says can happen is what the switch does. The egress side never
    // refuses an admitted lossless frame (dataplane mmu::egress: only lossy frames meet the
    // queue's limit there), so no warning may say they can be dropped at egress; what does
    // happen is the queue going past its limit into the egress pool the lossy queues share.
    let w = l.warnings.iter().find(|w| w.contains("lossless PG 3")).unwrap();
    assert!(!w.contains("may be dropped") && !w.contains("can be dropped"), "{w}");
    assert!(
        w.contains("never drops an admitted lossless frame at egress")
            && w.contains("the queue grows past its limit")
            && w.contains("lossy queues")
            && w.contains("drop sooner"),
        "{w}"
    );
    // Unlimited (the default for a lossless queue) never warns.
    assert!(ok(BASE).warnings.is_empty());
}

#[test]
fn explicit_headroom_is_used_and_warns_when_small() {
    let l = ok(&with("[pg.3]\nheadroom = \"10KiB\""));
    assert_eq!(l.config.ports[0].headroom_bytes[3], 10_240);
    has(
        &l.warnings,
        &["pg.3.headroom (10KiB) is below the headroom computed for port 0, port 1: 25KiB (100 cells) for 25G over 15m"],
    );
    let l = ok(&with("[pg.3]\nheadroom = \"64KiB\""));
    assert!(l.warnings.is_empty());
    assert_eq!(l.config.ports[1].headroom_bytes[3], 65_536);
}

/// Issue 49 item 4: the warning quotes the key and value the file wrote (a port's own, or the
/// global table's), and names every port it is short on, not only the first.
#[test]
fn a_small_headroom_warning_names_its_key_and_every_port() {
    let text = r#"
[port_defaults]
speed = "25G"

[[port]]
id = 0
[[port]]
id = 1
name = "Ethernet4"
cable = "40m"
[[port]]
id = 2
cable = "40m"
[[port]]
id = 3
name = "Ethernet12"
cable = "40m"
[port.pg.3]
headroom = "12KiB"

[classify]
dscp_to_tc = { 26 = 3 }

[pfc]
priorities = [3]

[pg.3]
headroom = "25KiB"
"#;
    let l = ok(text);
    let w: Vec<&String> = l.warnings.iter().filter(|w| w.contains(".headroom (")).collect();
    assert_eq!(w.len(), 2, "{w:#?}");
    // The global value: short on the two 40 m ports that use it, port 0 (15 m) not.
    has(
        &l.warnings,
        &[
            "pg.3.headroom (25KiB) is below the headroom computed for Ethernet4 (port 1), port 2: ",
            "over 40m",
        ],
    );
    assert!(!w.iter().any(|w| w.contains("port 0")), "{w:#?}");
    // Port 3's own value, under its own key.
    has(
        &l.warnings,
        &["port[3].pg.3.headroom (12KiB) is below the headroom computed for Ethernet12 (port 3): "],
    );
    assert_eq!(l.config.ports[3].headroom_bytes[3], 12 * 1024);
}

#[test]
fn fdb_static_entries() {
    let p = problems(&with(
        "[fdb]\naging = \"300\"\ncapacity = 0\nstatic = [ { mac = \"01:00:5e:00:00:01\", port = 0 }, \
         { mac = \"02:00:00:00:00:zz\", port = 7 } ]",
    ));
    has(&p, &["fdb.aging", "\"300\" is not a duration"]);
    has(
        &problems(&with("[fdb]\naging = \"0s\"")),
        &["fdb.aging (0s) must be above 0"],
    );
    has(&p, &["fdb.capacity: 0 is out of range"]);
    has(&p, &["fdb.static[0].mac", "multicast"]);
    has(&p, &["fdb.static[1].mac", "not a MAC address"]);
    has(&p, &["fdb.static[1].port", "no port with id 7"]);

    let c = ok(&with("[fdb]\nstatic = [ { mac = \"02:00:00:00:00:01\", port = 1 } ]")).config;
    assert_eq!(c.fdb.static_entries[0].mac, [2, 0, 0, 0, 0, 1]);
    assert_eq!(c.fdb.static_entries[0].port, 1);
}

#[test]
fn fdb_learning_limits() {
    let c = ok(&with("[fdb]\ncapacity = 1000")).config;
    let ports = c.ports.len();
    assert_eq!(c.fdb.port_limit, 1000 / ports, "an equal share by default");
    assert_eq!(c.fdb.learn_rate, 1000);
    let c = ok(&with("[fdb]\ncapacity = 1000\nport_limit = 1000\nlearn_rate = 50")).config;
    assert_eq!((c.fdb.port_limit, c.fdb.learn_rate), (1000, 50));
    let p = problems(&with("[fdb]\ncapacity = 1000\nport_limit = 1001\nlearn_rate = 0"));
    has(&p, &["fdb.port_limit: 1001 is out of range 1..=1000"]);
    has(&p, &["fdb.learn_rate: 0 is out of range"]);
}

#[test]
fn lossless_priority_without_traffic_warns() {
    let l = ok(&BASE.replace("dscp_to_tc = { 26 = 3, 48 = 6 }", ""));
    has(
        &l.warnings,
        &["pfc.priorities", "priority 3", "no DSCP value maps to it"],
    );
}

#[test]
fn unused_ecn_profile_warns() {
    let l = ok(&with("[ecn.spare]\nkmin = 1000\nkmax = 2000\npmax = \"1/10\""));
    has(&l.warnings, &["ecn.spare: not used by any queue"]);
}

#[test]
fn lossy_pg_and_queue_defaults() {
    let c = ok(BASE).config;
    assert_eq!(c.pgs[0].shared, Threshold::Unlimited);
    assert_eq!(c.pgs[0].xon_offset_bytes, 0);
    assert_eq!(c.pgs[3].shared, Threshold::Dynamic { alpha: 0.125 });
    assert_eq!(c.pgs[3].xon_offset_bytes, 3072);
    assert_eq!(c.queues[0].shared, Threshold::Dynamic { alpha: 1.0 });
    assert_eq!(c.queues[0].sched, SchedMode::Wdrr { weight: 1 });
    assert!(c.queues[0].ecn.is_none() && c.queues[0].shaper.is_none());
    assert_eq!(c.ports[0].headroom_bytes, [0, 0, 0, 25_600, 0, 0, 0, 0]);
}

#[test]
fn io_error_names_the_path() {
    let e = controlplane::load_file(std::path::Path::new("/nonexistent/rocesw.toml")).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Io);
    assert!(
        e.to_string().starts_with("/nonexistent/rocesw.toml: cannot read"),
        "{e}"
    );
}

mod run_section {
    use controlplane::load_str;

    const BASE: &str = r#"
[port_defaults]
speed = "25G"
[[port]]
id = 0
interface = "rswa0"
[[port]]
id = 1
interface = "rswb0"
[[port]]
id = 2
"#;

    #[test]
    fn defaults_one_busy_worker_and_round_robin_ports() {
        let c = load_str(&format!("{BASE}[run]\nworkers = 2\n")).unwrap().config;
        assert_eq!(c.run.workers, 2);
        assert_eq!(c.run.idle_sleep_ns, None);
        assert_eq!(c.ports.iter().map(|p| p.worker).collect::<Vec<_>>(), vec![0, 1, 0]);
        assert_eq!(c.ports[0].interface.as_deref(), Some("rswa0"));
        assert_eq!(c.ports[2].interface, None);
        let c = load_str(BASE).unwrap().config;
        assert_eq!(c.run.workers, 1);
        assert!(c.ports.iter().all(|p| p.worker == 0));
    }

    #[test]
    fn idle_sleep_and_drain_timeout_parse() {
        let c = load_str(&format!("{BASE}[run]\nidle = \"50us\"\ndrain_timeout = \"250ms\"\n"))
            .unwrap()
            .config;
        assert_eq!(c.run.idle_sleep_ns, Some(50_000));
        assert_eq!(c.run.drain_timeout_ns, 250_000_000);
    }

    #[test]
    fn bad_run_settings_name_their_field() {
        let text = BASE.replace("interface = \"rswb0\"", "interface = \"rswa0\"\nworker = 3");
        let err = load_str(&format!("{text}[run]\nworkers = 2\ncores = [0]\nidle = \"soon\"\n")).unwrap_err();
        let msg = err.to_string();
        for needle in ["port[1].interface", "port[1].worker", "run.cores", "run.idle"] {
            assert!(msg.contains(needle), "{needle} missing from:\n{msg}");
        }
        let err = load_str(&BASE.replace("\"rswa0\"", "\"this-name-is-far-too-long\"")).unwrap_err();
        assert!(err.to_string().contains("port[0].interface"), "{err}");
    }
}

/// `[[port]] pg.N` / `queue.N`: field by field over the global tables, for that port only.
#[test]
fn per_port_overrides() {
    let with_port1 = |extra: &str| BASE.replacen("[[port]]\nid = 1\n", &format!("[[port]]\nid = 1\n{extra}\n"), 1);
    let l = ok(
        &with_port1("queue.3 = { ecn = \"hot\" }\npg.3 = { static = \"64KiB\" }\nqueue.0 = { weight = 4 }").replace(
            "[ecn.roce]",
            "[ecn.hot]\nkmin = \"10KB\"\nkmax = \"40KB\"\npmax = 0.5\n\n[ecn.roce]",
        ),
    );
    let (p0, p1) = (&l.config.ports[0], &l.config.ports[1]);
    assert_eq!(p0.queues[3].ecn.as_ref().unwrap().name, "roce");
    assert_eq!(p1.queues[3].ecn.as_ref().unwrap().name, "hot");
    // The override replaced the limit kind (the global PG 3 is dynamic), nothing else.
    assert!(matches!(p0.pgs[3].shared, Threshold::Dynamic { .. }));
    assert_eq!(p1.pgs[3].shared, Threshold::Static { bytes: 65536 });
    assert_eq!(p1.pgs[3].xon_offset_bytes, p0.pgs[3].xon_offset_bytes);
    assert_eq!(p1.queues[0].sched, SchedMode::Wdrr { weight: 4 });
    assert_eq!(p0.queues[0].sched, SchedMode::Wdrr { weight: 1 });
    assert_eq!(
        l.config.queues[3].ecn.as_ref().unwrap().name,
        "roce",
        "the global table is unchanged"
    );
    assert!(
        !l.warnings.iter().any(|w| w.contains("ecn.hot")),
        "a profile used by one port is used: {:?}",
        l.warnings
    );

    // Errors name the port's field.
    let p = problems(&with_port1("queue.3 = { ecn = \"nope\" }"));
    assert!(
        p.iter()
            .any(|e| e.starts_with("port[1].queue.3.ecn") && e.contains("nope")),
        "{p:?}"
    );
    let p = problems(&with_port1("pg.3 = { alpha = \"1/8\", static = \"1KB\" }"));
    assert!(p.iter().any(|e| e.starts_with("port[1].pg.3")), "{p:?}");
    let p = problems(&with_port1("queue.9 = { weight = 2 }"));
    assert!(p.iter().any(|e| e.contains("port[1].queue.9")), "{p:?}");
    let e = load_str(&with_port1("pg.3 = { colour = 1 }")).unwrap_err().to_string();
    assert!(e.contains("colour") && e.contains("line 9"), "{e}");
    // A port's own minimums count against the buffer.
    let p = problems(&with_port1("queue.0 = { min = \"64MiB\" }"));
    assert!(p.iter().any(|e| e.contains("buffer.size")), "{p:?}");
}

/// The UCloud check runs per egress port with each port's own profiles: a queue limited on one
/// port only is warned about for that port, and a PG override on one sender counts for it.
#[test]
fn ucloud_check_uses_each_ports_profiles() {
    let with_port1 = |extra: &str| BASE.replacen("[[port]]\nid = 1\n", &format!("[[port]]\nid = 1\n{extra}\n"), 1);
    let lossless = |l: &Loaded| -> Vec<String> {
        l.warnings
            .iter()
            .filter(|w| w.contains("lossless PG"))
            .cloned()
            .collect()
    };
    let limited = |t: String| t.replace("ecn = \"roce\"", "ecn = \"roce\"\nstatic = \"1MiB\"");

    // Only port 1's queue 3 is limited (the global one is unlimited): one warning, for port 1.
    let l = ok(&with_port1("queue.3 = { static = \"64KiB\" }"));
    let w = lossless(&l);
    assert_eq!(w.len(), 1, "{w:?}");
    has(
        &w,
        &["queue.3 on port 1:", "1 ingress port ×", "make queue.3 unlimited"],
    );

    // The global queue limited, port 1's own unlimited: only port 0 is at risk.
    let l = ok(&limited(with_port1("queue.3 = { unlimited = true }")));
    let w = lossless(&l);
    assert!(w.iter().all(|w| w.contains("on port 0:")), "{w:?}");

    // Port 1 may hold 2 MiB of PG 3: a 1 MiB queue on port 0 (fed by port 1) is at risk, the
    // one on port 1 (fed by port 0's default PG) is not.
    let l = ok(&limited(with_port1("pg.3 = { static = \"2MiB\" }")));
    let w = lossless(&l);
    assert_eq!(w.len(), 1, "{w:?}");
    has(&w, &["queue.3 on port 0:", "shared 8192 + min 0 + headroom"]);

    // Three ports, one of them holding more: the senders are counted by their figures.
    let three = limited(BASE.replacen(
        "[[port]]\nid = 1\n",
        "[[port]]\nid = 1\npg.3 = { static = \"2MiB\" }\n[[port]]\nid = 2\n",
        1,
    ));
    let w = lossless(&ok(&three));
    has(
        &w,
        &[
            "queue.3 on ports 0, 2:",
            "1 ingress port × (shared 8192 + min 0 + headroom ",
        ],
    );

    // 60 ports, one of them holding more: the senders by kind, the egress ports at most eight
    // by id, so a warning stays one line and there are as many as kinds of egress port (the
    // big sender's own queue sees one sender fewer of its kind), not one a port.
    let many: String = (2..60).map(|i| format!("[[port]]\nid = {i}\n")).collect();
    let wide = limited(BASE.replacen(
        "[[port]]\nid = 1\n",
        &format!("[[port]]\nid = 1\npg.3 = {{ static = \"2MiB\" }}\n{many}"),
        1,
    ));
    let w = lossless(&ok(&wide));
    assert!(w.len() <= 2, "{} warnings: {w:?}", w.len());
    assert!(w.iter().all(|w| w.len() < 1200), "{w:?}");
    has(
        &w,
        &[
            "queue.3 on ports 0, 2, 3, 4, 5, 6, 7, 8, and 51 more:",
            "58 ingress ports ×",
        ],
    );
}

#[test]
fn peer_defaults_by_backend_and_refuses_unknown_kinds() {
    let port = |extra: &str| BASE.replacen("[[port]]\nid = 1\n", &format!("[[port]]\nid = 1\n{extra}\n"), 1);
    let cfg = ok(&port("interface = \"veth1\"")).config;
    assert_eq!(
        cfg.ports[1].peer,
        controlplane::model::PeerKind::Emulated,
        "an interface has software at the far end (issue 9)"
    );
    assert_eq!(cfg.ports[1].backend_kind(), controlplane::model::BackendKind::Interface);
    let cfg = ok(&port("interface = \"veth1\"\npeer = \"wire\"")).config;
    assert_eq!(cfg.ports[1].peer, controlplane::model::PeerKind::Wire);
    let cfg = ok(&port("pcap = { input = \"in.pcap\" }")).config;
    assert_eq!(cfg.ports[1].peer, controlplane::model::PeerKind::Emulated);
    let p = problems(&port("interface = \"veth1\"\npeer = \"nic\""));
    has(&p, &["port[1].peer", "\"nic\"", "emulated", "wire"]);
    // DPDK ports are wires unless told otherwise.
    let cfg = ok(&port("dpdk = \"net_vhost0,iface=/tmp/vm0.sock\"")).config;
    assert_eq!(cfg.ports[1].peer, controlplane::model::PeerKind::Wire);
    assert_eq!(cfg.ports[1].backend_kind(), controlplane::model::BackendKind::DpdkVdev);
    let cfg = ok(&port("dpdk = \"3b:00.0\"")).config;
    assert_eq!(cfg.ports[1].peer, controlplane::model::PeerKind::Wire);
    assert_eq!(cfg.ports[1].backend_kind(), controlplane::model::BackendKind::DpdkPci);
}

/// `[[port]] dpdk = "..."` (issue 8): the device string is checked without DPDK, one backend
/// per port, one port per device, and PCI devices need hugepages.
#[test]
fn dpdk_ports_are_validated() {
    let port0 = |extra: &str| BASE.replacen("[[port]]\nid = 0\n", &format!("[[port]]\nid = 0\n{extra}\n"), 1);
    let l = ok(&port0(
        "dpdk = \"net_pcap0,rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/out.pcap\"",
    ));
    assert_eq!(
        l.config.ports[0].dpdk.as_deref(),
        Some("net_pcap0,rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/out.pcap")
    );
    let d = &l.config.run.dpdk;
    assert!(!d.hugepages, "no PCI port: no hugepages by default");
    assert_eq!((d.memory_mb, d.mbufs), (512, 16383));
    assert!(d.eal_args.is_empty());

    has(
        &problems(&port0("dpdk = \"net_ring0,,\"")),
        &["port[0].dpdk", "malformed DPDK device"],
    );
    has(&problems(&port0("dpdk = \"\"")), &["port[0].dpdk", "empty"]);
    has(
        &problems(&port0("dpdk = \"net_null0\"\ninterface = \"veth0\"")),
        &["port[0]", "one of `interface`, `pcap` or `dpdk`"],
    );
    let both = BASE.replacen("id = 0\n", "id = 0\ndpdk = \"net_null0\"\n", 1).replacen(
        "id = 1\n",
        "id = 1\ndpdk = \"net_null0,size=64\"\n",
        1,
    );
    has(
        &problems(&both),
        &["port[1].dpdk", "net_null0 is already used by port[0]"],
    );

    // A PCI port turns hugepages on; refusing them is an error naming the port.
    let pci = ok(&port0("dpdk = \"3b:00.0\""));
    assert_eq!(pci.config.ports[0].dpdk.as_deref(), Some("0000:3b:00.0"));
    assert!(pci.config.run.dpdk.hugepages);
    let refused = port0("dpdk = \"3b:00.0\"") + "\n[run.dpdk]\nhugepages = false\n";
    has(&problems(&refused), &["run.dpdk.hugepages", "PCI port 0000:3b:00.0"]);

    let tuned = port0("dpdk = \"net_null0\"")
        + "\n[run.dpdk]\nmemory = \"1GiB\"\nmbufs = 8191\neal_args = [\"--log-level=pmd.net.null:debug\"]\n";
    let d = ok(&tuned).config.run.dpdk;
    assert_eq!((d.memory_mb, d.mbufs, d.eal_args.len()), (1024, 8191, 1));
    let bad = problems(&(port0("dpdk = \"net_null0\"") + "\n[run.dpdk]\nmemory = \"1MiB\"\nmbufs = 10\n"));
    has(&bad, &["run.dpdk.memory", "64MiB"]);
    has(&bad, &["run.dpdk.mbufs"]);
}

#[test]
fn a_pause_shorter_than_pfc_must_hold_warns() {
    // 1 quantum at 25G is 20 ns: the peer's pause runs out long before a refresh can reach it
    // (a 1518 B frame ahead of it alone takes 494 ns), so lossless frames get dropped.
    let l = ok(&BASE.replace("priorities = [3]", "priorities = [3]\npause_quanta = 1"));
    has(
        &l.warnings,
        &[
            "pfc.pause_quanta (1 = 20 ns at 25G)",
            "less than the 2235 ns PFC must hold",
            "at least 219 quanta",
            "pfc.refresh (0.5) leaves 10 ns",
            "peer response",
            "(ports 0, 1)",
        ],
    );
    // 219 quanta is the least that warning asks for; it, like the default (65535 quanta,
    // 1.34 ms at 25G), is quiet.
    let l = ok(&BASE.replace("priorities = [3]", "priorities = [3]\npause_quanta = 219"));
    assert!(
        !l.warnings.iter().any(|w| w.contains("pause_quanta")),
        "{:?}",
        l.warnings
    );
}

#[test]
fn refreshes_that_outpace_the_link_warn() {
    // 219 quanta (4.48 us at 25G) is long enough, but refreshing it every 0.001 of that (4 ns)
    // asks the link for a PFC frame faster than it can send one.
    let l = ok(&BASE.replace(
        "priorities = [3]",
        "priorities = [3]\npause_quanta = 219\nrefresh = 0.001",
    ));
    has(
        &l.warnings,
        &[
            "pfc.refresh (0.001) refreshes an XOFF every 4 ns at 25G",
            "less than the 521 ns",
            "refreshes outpace the link",
        ],
    );
    assert!(
        !l.warnings.iter().any(|w| w.starts_with("pfc.pause_quanta")),
        "{:?}",
        l.warnings
    );
    let l = ok(&BASE.replace("priorities = [3]", "priorities = [3]\nrefresh = 0.001"));
    assert!(!l.warnings.iter().any(|w| w.contains("outpace")), "{:?}", l.warnings);
}

#[test]
fn a_buffer_the_switch_cannot_allocate_is_refused() {
    // 64 GiB: before, `rocectl check` passed it and replay aborted on allocation.
    let p = problems(&with("[buffer]\nsize = \"64GiB\""));
    has(
        &p,
        &["buffer.size (64GiB)", "above the largest buffer the switch takes, 1GiB"],
    );
    // 512 MiB in 64 B cells was refused (12.5 GiB of 1536 B packet slots, above a fixed
    // 4 GiB): its frames now share one arena of its cells and bounded slack, and only a machine
    // without the memory refuses it (`rocectl check`, `rocesw run`), with the figures.
    let l = ok(&with("[buffer]\nsize = \"512MiB\"\ncell = \"64B\""));
    let f = controlplane::memory::footprint(&l.config);
    let frames = (512 << 20) / 64 + 32 * 8 * 2;
    assert!((frames..frames * 3 / 2).contains(&f.slots), "{f:?}");
    assert_eq!(f.arena_bytes, f.slots * 64);
    let why = controlplane::memory::machine_refusal(&l.config, 512 << 20).expect("512 MiB is too little");
    assert!(
        why.contains("MiB at start-up: an arena of") && why.contains("above the 512 MiB this machine has available"),
        "{why}"
    );
    // What the switch allocates is what validation computed.
    let l = ok(&with("[buffer]\nsize = \"64MiB\"\ncell = \"64B\""));
    let f = controlplane::memory::footprint(&l.config);
    assert!(f.arena_bytes < (64 << 20) * 3 / 2, "{f:?}");
}

#[test]
fn a_lossless_queue_shaped_too_slow_to_drain_is_refused() {
    let shaped = |rate: &str, extra: &str| {
        BASE.replace(
            "[queue.3]\necn = \"roce\"",
            &format!("[queue.3]\necn = \"roce\"\nshaper = {{ rate = \"{rate}\", burst = \"16KiB\" }}{extra}"),
        )
    };
    // 1 bit/s: a 1518 B frame takes 3.4 hours; replay ran for ever writing pause frames.
    let p = problems(&shaped("1", ""));
    has(
        &p,
        &[
            "queue.3.shaper.rate (1bps) on lossless queue 3 takes 12144s to send one 1518 B frame",
            "longer than 1s (no PFC watchdog)",
            "use at least 12144bps",
        ],
    );
    // With a watchdog, its detection time is the window.
    let p = problems(&shaped("100K", "").replace(
        "priorities = [3]",
        "priorities = [3]\nwatchdog = { detection = \"100ms\" }",
    ));
    has(
        &p,
        &[
            "queue.3.shaper.rate (100K)",
            "pfc.watchdog.detection (100ms)",
            "at least 121440bps",
        ],
    );
    // A lossy queue may be shaped as slowly as anyone likes; a sane lossless rate passes.
    ok(&with("[queue.0]\nshaper = { rate = \"1\", burst = \"16KiB\" }"));
    ok(&shaped("1M", ""));
}

/// `scheduler` names a kind, in `[port_defaults]` or per port; a port's overrides the default;
/// an unknown kind names the field and the kinds there are.
#[test]
fn scheduler_kind_per_port_over_the_default() {
    let c = ok(BASE).config;
    assert!(c
        .ports
        .iter()
        .all(|p| p.scheduler == controlplane::SchedulerConfig::SpWdrr));
    let text = BASE.replace("speed = \"25G\"\n", "speed = \"25G\"\nscheduler = \"sp_wdrr\"\n");
    assert_eq!(ok(&text).config.ports[1].scheduler.name(), "sp_wdrr");
    let bad = BASE.replace("[[port]]\nid = 1\n", "[[port]]\nid = 1\nscheduler = \"fifo\"\n");
    has(
        &problems(&bad),
        &["port[1].scheduler", "\"fifo\" is not one of sp_wdrr"],
    );
    let bad = BASE.replace("speed = \"25G\"\n", "speed = \"25G\"\nscheduler = \"wfq\"\n");
    has(&problems(&bad), &["port_defaults.scheduler", "\"wfq\""]);
}

/// `vlarb` in OpenSM's form: the defaults' tables, a port's fields over them; entries resolved
/// in order with their weights and the limit.
#[test]
fn vlarb_tables_resolve_with_per_port_overrides() {
    use controlplane::{SchedulerConfig, VlArbEntry};
    let text = BASE.replace(
        "speed = \"25G\"\n",
        "speed = \"25G\"\nscheduler = \"vlarb\"\n\
         [port_defaults.vlarb]\nhigh = [[3, 16], [6, 255]]\nlow = [[0, 64], [1, 128]]\nhigh_limit = 6\n",
    );
    let text = text.replace(
        "[[port]]\nid = 1\n",
        "[[port]]\nid = 1\nvlarb = { low = [[0, 8]], high_limit = 255 }\n",
    );
    let l = ok(&text);
    let SchedulerConfig::VlArb(p0) = &l.config.ports[0].scheduler else {
        panic!("port 0 is vlarb")
    };
    assert_eq!(
        p0.high,
        [VlArbEntry { vl: 3, weight: 16 }, VlArbEntry { vl: 6, weight: 255 }]
    );
    assert_eq!(p0.low.len(), 2);
    assert_eq!(p0.high_limit, 6);
    let SchedulerConfig::VlArb(p1) = &l.config.ports[1].scheduler else {
        panic!("port 1 is vlarb")
    };
    assert_eq!(p1.high, p0.high, "the default high table");
    assert_eq!(p1.low, [VlArbEntry { vl: 0, weight: 8 }], "its own low table");
    assert_eq!(p1.high_limit, 255);
    // One port back on sp_wdrr: the others stay vlarb.
    let mixed = text.replace("[[port]]\nid = 0\n", "[[port]]\nid = 0\nscheduler = \"sp_wdrr\"\n");
    let l = ok(&mixed);
    assert_eq!(l.config.ports[0].scheduler, SchedulerConfig::SpWdrr);
    assert_eq!(l.config.ports[1].scheduler.name(), "vlarb");
}

/// Every bad field is named: VL, weight, entry shape, count, limit; a vlarb port with nothing to
/// serve; each default-table problem once, however many ports use it.
#[test]
fn vlarb_errors_name_the_field() {
    let bad = BASE.replace(
        "speed = \"25G\"\n",
        "speed = \"25G\"\nscheduler = \"vlarb\"\n\
         [port_defaults.vlarb]\nhigh = [[9, 16], [6, 300], [1]]\nlow = [[0, 64]]\nhigh_limit = 256\n",
    );
    let p = problems(&bad);
    has(&p, &["port_defaults.vlarb.high[0]", "VL 9 is out of range 0..=7"]);
    has(
        &p,
        &["port_defaults.vlarb.high[1]", "weight 300 is out of range 0..=255"],
    );
    has(&p, &["port_defaults.vlarb.high[2]", "[VL, weight]", "found 1 number"]);
    has(&p, &["port_defaults.vlarb.high_limit", "256 is out of range 0..=255"]);
    assert_eq!(
        p.iter().filter(|e| e.contains("VL 9")).count(),
        1,
        "reported once for two ports: {p:#?}"
    );
    let entries: Vec<String> = (0..65).map(|i| format!("[{}, 1]", i % 8)).collect();
    let long = BASE.replace(
        "[[port]]\nid = 1\n",
        &format!(
            "[[port]]\nid = 1\nscheduler = \"vlarb\"\nvlarb = {{ low = [{}] }}\n",
            entries.join(", ")
        ),
    );
    has(&problems(&long), &["port[1].vlarb.low", "65 entries, at most 64"]);
    let empty = BASE.replace(
        "[[port]]\nid = 1\n",
        "[[port]]\nid = 1\nscheduler = \"vlarb\"\nvlarb = { high = [[0, 0]] }\n",
    );
    has(&problems(&empty), &["port[1].vlarb", "at least one", "weight above 0"]);
    let none = BASE.replace("[[port]]\nid = 1\n", "[[port]]\nid = 1\nscheduler = \"vlarb\"\n");
    has(&problems(&none), &["port[1].vlarb", "at least one"]);
}

/// What vlarb makes meaningless or risky is warned about: tables on an sp_wdrr port, queue
/// sched/weight on a vlarb port, a lossless or CNP queue the tables leave out.
#[test]
fn vlarb_warnings() {
    let ignored = BASE.replace("[[port]]\nid = 1\n", "[[port]]\nid = 1\nvlarb = { low = [[0, 8]] }\n");
    let w = ok(&ignored).warnings;
    has(&w, &["port[1].vlarb: ignored", "sp_wdrr"]);
    let defaults_only = BASE.replace("speed = \"25G\"\n", "speed = \"25G\"\nvlarb = { low = [[0, 8]] }\n");
    has(&ok(&defaults_only).warnings, &["port_defaults.vlarb: ignored"]);
    let text = with("[queue.0]\nweight = 2\n").replace(
        "speed = \"25G\"\n",
        "speed = \"25G\"\nscheduler = \"vlarb\"\nvlarb = { low = [[0, 8]] }\n",
    );
    let w = ok(&text).warnings;
    has(&w, &["queue.{0}.sched/weight: not used on port 0, 1"]);
    has(
        &w,
        &[
            "port[0].vlarb",
            "queue 3, 6 of port 0",
            "no entry with a weight above 0",
        ],
    );
    has(&w, &["port[0].vlarb", "CNP queue (6) is not in the high table"]);
}

/// `scheduler = "edf"` with its `edf` table: the defaults', a port's own keys over them, and
/// every mistake named by its field.
#[test]
fn edf_settings_resolve_per_port_and_name_their_fields() {
    use controlplane::{EdfMode, SchedulerConfig};
    let edf = |defaults: &str, port1: &str| {
        BASE.replace(
            "speed = \"25G\"\n",
            &format!("speed = \"25G\"\nscheduler = \"edf\"\n{defaults}"),
        )
        .replace("[[port]]\nid = 1\n", &format!("[[port]]\nid = 1\n{port1}"))
    };
    let l = ok(&edf(
        "[port_defaults.edf]\nbudget = { 3 = \"50us\" }\ndscp_budget = { 24 = \"20us\" }\n",
        "edf = { mode = \"fifo2\", budget = { 2 = \"1ms\", 3 = \"5us\" }, tag = \"flow_label\" }\n",
    ));
    let SchedulerConfig::Edf(p0) = &l.config.ports[0].scheduler else {
        panic!("port 0 runs edf")
    };
    let SchedulerConfig::Edf(p1) = &l.config.ports[1].scheduler else {
        panic!("port 1 runs edf")
    };
    assert_eq!(
        (p0.mode, p0.regulated(), p0.queue_budget_ns[3]),
        (EdfMode::TakeOver, 0b1000, Some(50_000))
    );
    assert_eq!((p0.dscp_budget_ns[24], p0.tag_unit_ns), (Some(20_000), None));
    assert_eq!(
        (p1.mode, p1.regulated(), p1.queue_budget_ns[3]),
        (EdfMode::Fifo2, 0b1100, Some(5_000))
    );
    assert_eq!(
        p1.dscp_budget_ns[24],
        Some(20_000),
        "a key the port does not set comes from the defaults"
    );
    assert_eq!(p1.tag_unit_ns, Some(16), "flow_label tags in 16 ns units by default");
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);

    has(
        &problems(&edf("", "")),
        &["port_defaults.edf.budget", "at least one regulated queue"],
    );
    let bad = edf(
        "[port_defaults.edf]\nmode = \"heap\"\nbudget = { 8 = \"1us\", 2 = \"2s\", 1 = 5 }\ndscp_budget = { 64 = \"1us\" }\ntag = \"dscp\"\ntag_unit = \"2ms\"\n",
        "",
    );
    let p = problems(&bad);
    has(
        &p,
        &[
            "port_defaults.edf.mode",
            "\"heap\" is not one of ideal, fifo2, take-over",
        ],
    );
    has(&p, &["port_defaults.edf.budget", "queue 8 is out of range"]);
    has(&p, &["port_defaults.edf.budget.2", "out of range"]);
    has(&p, &["port_defaults.edf.budget.1", "duration"]);
    has(&p, &["port_defaults.edf.dscp_budget", "DSCP 64"]);
    has(&p, &["port_defaults.edf.tag", "\"dscp\""]);
    has(&p, &["port_defaults.edf.tag_unit", "out of range"]);
    let p = problems(&edf(
        "[port_defaults.edf]\nbudget = { 3 = \"1us\" }\n",
        "edf = { mode = \"fast\" }\n",
    ));
    has(&p, &["port[1].edf.mode", "\"fast\""]);
    // Settings for a scheduler no port runs are harmless but said.
    let l = ok(&with("[port_defaults.edf]\nbudget = { 3 = \"1us\" }"));
    has(&l.warnings, &["port_defaults.edf", "no port's scheduler is \"edf\""]);
}

/// Ports of different kinds in one config: each takes its own kind's defaults, and a section
/// for a kind the port does not run is named in a warning, not applied.
#[test]
fn vlarb_and_edf_ports_side_by_side() {
    use controlplane::SchedulerConfig;
    let text = BASE
        .replace(
            "speed = \"25G\"\n",
            "speed = \"25G\"\nscheduler = \"vlarb\"\nvlarb = { high = [[6, 255], [3, 16]], low = [[0, 64]] }\n\
             [port_defaults.edf]\nbudget = { 3 = \"50us\" }\n",
        )
        .replace("[[port]]\nid = 1\n", "[[port]]\nid = 1\nscheduler = \"edf\"\n");
    let l = ok(&text);
    assert!(matches!(l.config.ports[0].scheduler, SchedulerConfig::VlArb(_)));
    let SchedulerConfig::Edf(e) = &l.config.ports[1].scheduler else {
        panic!("port 1 runs edf")
    };
    assert_eq!(e.queue_budget_ns[3], Some(50_000));
    assert!(
        !l.warnings.iter().any(|w| w.contains("ignored")),
        "both default sections are used: {:?}",
        l.warnings
    );
    // Port 0 (vlarb) with an edf table of its own, port 1 (edf) with a vlarb table.
    let l = ok(&text
        .replace("[[port]]\nid = 0\n", "[[port]]\nid = 0\nedf = { mode = \"fifo2\" }\n")
        .replace(
            "scheduler = \"edf\"\n",
            "scheduler = \"edf\"\nvlarb = { low = [[1, 8]] }\n",
        ));
    has(
        &l.warnings,
        &["port[0].edf: ignored", "port 0's scheduler is \"vlarb\""],
    );
    has(
        &l.warnings,
        &["port[1].vlarb: ignored", "port 1's scheduler is \"edf\""],
    );
}

/// Issue 21 item 15: duplicate DPDK devices are found by driver-normalised name (eth_null0 is
/// net_null0) and by what they take for themselves: two vdevs on one host interface, a vdev
/// on a port's AF_PACKET interface, two vhost ports on one socket, two pcap ports writing one
/// file. Reading one capture twice, or two different interfaces, is fine.
#[test]
fn dpdk_duplicates_are_found_by_driver_and_by_what_they_use() {
    let two = |a: &str, b: &str| {
        BASE.replacen("id = 0\n", &format!("id = 0\n{a}\n"), 1)
            .replacen("id = 1\n", &format!("id = 1\n{b}\n"), 1)
    };
    has(
        &problems(&two("dpdk = \"eth_null0\"", "dpdk = \"net_null0\"")),
        &["port[1].dpdk: device net_null0 is already used by port[0]"],
    );
    has(
        &problems(&two("dpdk = \"net_null0\"", "dpdk = \"eth_null0\"")),
        &["port[1].dpdk: device eth_null0 (eth_null0 is net_null0) is already used by port[0]"],
    );
    has(
        &problems(&two(
            "dpdk = \"net_af_packet0,iface=veth0\"",
            "dpdk = \"net_pcap1,iface=veth0\"",
        )),
        &["port[1].dpdk: interface veth0 is already used by port[0] (its dpdk device)"],
    );
    has(
        &problems(&two("interface = \"veth0\"", "dpdk = \"net_af_packet1,iface=veth0\"")),
        &["port[1].dpdk: interface veth0 is already used by port[0] (its interface)"],
    );
    has(
        &problems(&two(
            "dpdk = \"net_vhost0,iface=/tmp/vm.sock\"",
            "dpdk = \"eth_vhost1,iface=/tmp/vm.sock,queues=1\"",
        )),
        &["port[1].dpdk: file /tmp/vm.sock is already used by port[0]"],
    );
    has(
        &problems(&two(
            "dpdk = \"net_pcap0,rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/out.pcap\"",
            "dpdk = \"net_pcap1,rx_pcap=/tmp/in2.pcap,tx_pcap=/tmp/out.pcap\"",
        )),
        &["port[1].dpdk: file /tmp/out.pcap is already used by port[0]"],
    );
    ok(&two(
        "dpdk = \"net_pcap0,rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/a.pcap\"",
        "dpdk = \"net_pcap1,rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/b.pcap\"",
    ));
    // /dev/null takes whatever any number of ports write (the benchmarks' sink).
    ok(&two(
        "dpdk = \"net_pcap0,rx_pcap=/tmp/in.pcap,tx_pcap=/dev/null\"",
        "dpdk = \"net_pcap1,rx_pcap=/tmp/in2.pcap,tx_pcap=/dev/null\"",
    ));
    ok(&two(
        "dpdk = \"net_af_packet0,iface=veth0\"",
        "dpdk = \"net_af_packet1,iface=veth1\"",
    ));
}

/// Issue 23 item 9: a SONiC name where rocesw has its own (an unknown key to the schema) gets
/// a hint naming rocesw's key, after the toml crate's message; other unknown keys get none.
#[test]
fn sonic_names_get_a_hint_to_rocesws_key() {
    for (text, want) in [
        (
            "[pg.3]\nxoff = \"40KiB\"\n",
            "hint: SONiC's `xoff` is rocesw's `headroom` in [pg.N]",
        ),
        ("[queue.0]\nxon = \"4KiB\"\n", "rocesw's `xon` in [pg.N]"),
        (
            "[WRED_PROFILE.roce]\nkmin = 1\n",
            "hint: SONiC's WRED_PROFILE is rocesw's [ecn.NAME]",
        ),
        (
            "[BUFFER_PROFILE.lossless]\nsize = 0\n",
            "SONiC's BUFFER_PROFILE is rocesw's [pg.N] and [queue.N]",
        ),
        ("[ecn.other]\ngreen_min_threshold = 1\n", "rocesw's `kmin`"),
        ("[pfc.watchdog]\ndetection_time = \"200ms\"\n", "rocesw's `detection`"),
    ] {
        let e = load_str(&format!("{BASE}\n{text}")).unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Syntax, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("unknown field") && msg.contains(want),
            "{text}: wanted {want:?}, got:\n{msg}"
        );
    }
    let e = load_str(&format!("{BASE}\n[pg.3]\nbogus = 1\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `bogus`") && !e.contains("hint"), "{e}");
}

/// `n` ports named as SONiC names them (Ethernet0, Ethernet4, ...), ids the numbers.
fn many_ports(n: usize) -> String {
    let ports: String = (0..n)
        .map(|i| format!("[[port]]\nid = {}\nname = \"Ethernet{}\"\n", 4 * i, 4 * i))
        .collect();
    format!("[buffer]\nsize = \"64MiB\"\n\n[port_defaults]\nspeed = \"100G\"\n\n{ports}")
}

#[test]
fn five_hundred_and_twelve_ports_load_and_513_are_refused_before_any_port_is_checked() {
    let l = ok(&many_ports(512));
    assert_eq!(l.config.ports.len(), 512);
    assert_eq!(l.config.ports[511].name.as_deref(), Some("Ethernet2044"));
    assert_eq!(l.config.ports[511].id, 2044);
    let p = problems(&many_ports(513));
    assert_eq!(p, ["port: 513 ports configured, at most 512 are supported"]);
    // 12,000 ports, each of them wrong twice (the same id, an MTU of 1): refused for the count
    // alone, no port's checks run.
    let dup: String = (0..12_000).map(|_| "[[port]]\nid = 7\nmtu = 1\n").collect();
    let p = problems(&format!("[port_defaults]\nspeed = \"25G\"\n{dup}"));
    assert_eq!(p, ["port: 12000 ports configured, at most 512 are supported"]);
}

#[test]
fn a_sonic_file_of_12000_ports_is_refused_for_its_count_alone() {
    let ports: Vec<String> = (0..12_000)
        .map(|i| format!("\"Ethernet{}\": {{\"speed\": \"bogus\", \"lanes\": \"{i}\"}}", 4 * i))
        .collect();
    let json = format!(
        "{{\"DEVICE_METADATA\": {{\"localhost\": {{\"hwsku\": \"Mellanox-SN2700\"}}}}, \"PORT\": {{{}}}}}",
        ports.join(", ")
    );
    let e = load_str(&json).expect_err("12,000 ports");
    assert_eq!(
        e.problems().iter().filter(|p| p.contains("Ethernet")).count(),
        0,
        "no port's problems: {:?}",
        &e.problems()[..e.problems().len().min(3)]
    );
    assert!(
        e.problems()
            .iter()
            .any(|p| p == "PORT: 12000 ports, at most 512 are supported"),
        "{:?}",
        e.problems()
    );
}

/// `[[port]] pfc`: a port's own PFC priorities, a subset of `[pfc] priorities` (SONiC's per-port
/// `pfc_enable`). Its PGs those priorities leave out are lossy on it (no headroom, the global
/// table's lossless-only settings set aside); a priority the switch lacks is refused.
#[test]
fn a_port_can_turn_pfc_off() {
    let text = BASE.replace("[[port]]\nid = 1\n", "[[port]]\nid = 1\npfc = []\n")
        + "\n[pg.3]\nheadroom = \"40KB\"\nxon_offset = \"2KB\"\n";
    let c = ok(&text).config;
    assert!(c.ports[0].pfc_enabled[3] && c.ports[0].pgs[3].lossless);
    assert_eq!(c.ports[0].headroom_bytes[3], 40_000);
    assert_eq!(c.ports[1].pfc_enabled, [false; 8]);
    assert!(!c.ports[1].pgs[3].lossless);
    assert_eq!(c.ports[1].headroom_bytes[3], 0);
    let e = problems(&BASE.replace("[[port]]\nid = 1\n", "[[port]]\nid = 1\npfc = [3, 5]\n"));
    has(&e, &["port[1].pfc[1]", "priority 5 is not one of pfc.priorities"]);
}
