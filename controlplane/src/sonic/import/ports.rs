//! PORT and CABLE_LENGTH: the ports, their ids (the number in a SONiC name) and cables.

use super::*;

/// Fields SONiC's PORT table may carry; the importer reads speed, mtu, index, lanes and
/// admin_status and passes over the rest (a data plane's buffers do not depend on them).
pub(super) const PORT_FIELDS: &[&str] = &[
    "speed",
    "mtu",
    "index",
    "lanes",
    "admin_status",
    "alias",
    "description",
    "fec",
    "autoneg",
    "adv_speeds",
    "interface_type",
    "adv_interface_types",
    "pfc_asym",
    "tpid",
    "link_training",
    "role",
    "parent_port",
    "subport",
    "mode",
    "dhcp_rate_limit",
    "asic_port_name",
    "coreid",
    "core_port_id",
    "num_voq",
    "media_type",
    "unreliable_los",
];

/// SONiC's port names, with their ids: the number in the name (`Ethernet8` is port 8), so
/// `--input 8=` and `--input Ethernet8=` agree; file order by `index`, then lanes.
pub(super) fn read_ports(db: &ConfigDb, p: &mut Problems) -> Vec<Port> {
    let mut out = Vec::new();
    let mut order = Vec::new();
    // Ports the file gives no speed (port_config.ini without a speed column, no neighbour to
    // set one): the ASIC's default, which the file does not say.
    let mut speedless: Vec<String> = Vec::new();
    for (name, f) in db.table("PORT") {
        p.known("PORT", name, f, PORT_FIELDS);
        let speed = int(p, "PORT", name, f, "speed");
        let speed_mbps = match speed {
            Some(s) if s > 0 => s as u64,
            Some(s) => {
                p.error(Origin::new("PORT", name, "speed"), format!("{s} Mb/s is not a speed"));
                continue;
            }
            None if !f.contains_key("speed") => {
                speedless.push(name.to_string());
                0
            }
            None => continue,
        };
        let mtu = match int(p, "PORT", name, f, "mtu") {
            Some(m) if (68..=9216).contains(&m) => m as u32,
            Some(m) => {
                p.error(Origin::new("PORT", name, "mtu"), format!("{m} is outside 68..=9216"));
                continue;
            }
            None => 9100,
        };
        let index = f.get("index").and_then(|i| i.trim().parse::<u64>().ok());
        let first_lane = f
            .get("lanes")
            .and_then(|l| l.split(',').next())
            .and_then(|l| l.trim().parse::<u64>().ok());
        let lanes = f.get("lanes").map_or(4, |l| l.split(',').count());
        let admin_up = match f.get("admin_status").map(String::as_str) {
            None | Some("up") => true,
            Some("down") => false,
            Some(other) => {
                p.error(
                    Origin::new("PORT", name, "admin_status"),
                    format!("{other:?} is not up or down"),
                );
                true
            }
        };
        let num = name
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse::<u16>()
            .ok()
            .filter(|_| name.ends_with(|c: char| c.is_ascii_digit()));
        order.push((index, first_lane, num, name.to_string()));
        out.push(Port {
            name: name.to_string(),
            id: num.unwrap_or(u16::MAX),
            speed_mbps,
            mtu,
            mtu_given: f.contains_key("mtu"),
            speed_given: f.contains_key("speed"),
            lanes,
            first_lane,
            cable: None,
            admin_up,
        });
    }
    if out.is_empty() && p.errors.is_empty() {
        p.error("PORT", "no ports: a switch config needs the PORT table");
    }
    if !speedless.is_empty() {
        // One count per speed (linear in the ports): the most common, the fastest on a tie.
        let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
        for s in out.iter().map(|x| x.speed_mbps).filter(|&s| s > 0) {
            *counts.entry(s).or_default() += 1;
        }
        let most = counts.iter().max_by_key(|(s, n)| (**n, **s)).map(|(s, _)| *s);
        match most {
            Some(s) => {
                for port in out.iter_mut().filter(|x| x.speed_mbps == 0) {
                    port.speed_mbps = s;
                }
                p.note(format!(
                    "{} port{} with no speed (the ASIC's default, which the file does not give) run at the file's most common speed, {s} Mb/s: {}",
                    speedless.len(),
                    if speedless.len() == 1 { "" } else { "s" },
                    speedless.join(", ")
                ));
            }
            None => {
                for name in &speedless {
                    p.error(Origin::new("PORT", name, "speed"), "missing (Mb/s, e.g. \"100000\")");
                }
            }
        }
    }
    // File order by index, then lanes (names are distinct, so the order is total): one sort.
    let mut keyed: Vec<_> = order.into_iter().zip(out).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<Port> = keyed.into_iter().map(|(_, port)| port).collect();
    // Ids: the number in each name when every name has a distinct one, else the position.
    let nums: BTreeSet<u16> = out.iter().map(|p| p.id).collect();
    if nums.len() != out.len() || out.iter().any(|p| p.id == u16::MAX) {
        for (i, port) in out.iter_mut().enumerate() {
            port.id = i as u16;
        }
        p.note("port ids are positions (the port names carry no distinct numbers)");
    }
    for port in &mut out {
        if !port.admin_up {
            p.note(format!(
                "{}: admin_status down; rocesw runs every port (a port with no input sends nothing)",
                port.name
            ));
        }
    }
    // CABLE_LENGTH|<name>|<port> = "40m".
    for (key, f) in db.table("CABLE_LENGTH") {
        for (port, len) in f {
            let at = Origin::new("CABLE_LENGTH", key, port);
            let Some(target) = out.iter_mut().find(|x| &x.name == port) else {
                p.error(at, "not a port of the PORT table");
                continue;
            };
            match len.strip_suffix('m').and_then(|n| n.parse::<f64>().ok()) {
                Some(m) if (0.0..=10_000.0).contains(&m) => target.cable = Some((at.to_string(), m)),
                _ => p.error(at, format!("{len:?} is not a cable length such as \"40m\"")),
            }
        }
    }
    out
}
