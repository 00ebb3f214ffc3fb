//! Device strings: what a config names a DPDK port by, checked before DPDK sees them.
//!
//! DPDK takes a device as `NAME[,key=value...]`, where NAME is a virtual device named after
//! its driver (`net_ring0`, `net_af_packet1`) or a PCI address (`0000:3b:00.0`). Given a
//! malformed string DPDK logs a line and carries on without the port, so the switch would
//! fail later with "no such port". Checking here turns that into an error that shows the
//! expected form. The check needs no DPDK, so config validation can use it anywhere.

use crate::error::{Error, ErrorKind};
use std::fmt;
use std::path::Path;

/// A parsed device string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The string as given (with a short PCI address completed to its domain form),
    /// passed to DPDK as `--vdev`, `-a` or to hotplug.
    devargs: String,
    /// Length of the name part of `devargs`.
    name_len: usize,
    pci: bool,
}

const EXPECTED: &str = "expected a virtual device named after its driver, \
    net_<driver><N>[,key=value...] (net_ring0, net_null1, net_tap0,iface=dtap0, \
    net_af_packet0,iface=eth1), or a PCI address (0000:3b:00.0)";

impl DeviceSpec {
    /// Parses and checks a device string.
    pub fn parse(text: &str) -> Result<DeviceSpec, Error> {
        let malformed = |why: &str| {
            Error::new(
                ErrorKind::MalformedDevice,
                format!("malformed DPDK device '{text}': {why}; {EXPECTED}"),
            )
        };
        if text.is_empty() {
            return Err(malformed("it is empty"));
        }
        if let Some(c) = text.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(malformed(&format!("it contains {c:?}")));
        }
        let (name, args) = match text.find(',') {
            Some(i) => (&text[..i], Some(&text[i + 1..])),
            None => (text, None),
        };
        let (name, pci) = if let Some(full) = pci_address(name) {
            (full, true)
        } else {
            check_vdev_name(name).map_err(|why| malformed(&why))?;
            (name.to_string(), false)
        };
        if let Some(args) = args {
            check_args(args).map_err(|why| malformed(&why))?;
        }
        let name_len = name.len();
        let devargs = match args {
            Some(a) => format!("{name},{a}"),
            None => name,
        };
        Ok(DeviceSpec { devargs, name_len, pci })
    }

    /// The port's name in DPDK (`net_ring0`, `0000:3b:00.0`): what
    /// `rte_eth_dev_get_port_by_name` looks up.
    pub fn name(&self) -> &str {
        &self.devargs[..self.name_len]
    }

    /// The whole string, for `--vdev`, `-a` or hotplug.
    pub fn devargs(&self) -> &str {
        &self.devargs
    }

    /// Whether this is a PCI device (which needs hugepages and a bound driver).
    pub fn is_pci(&self) -> bool {
        self.pci
    }

    /// The name with the driver normalised (`eth_null0` → `net_null0`: `eth_*` are aliases of
    /// `net_*`), so two spellings of one device compare equal.
    pub fn canonical_name(&self) -> String {
        match self.name().strip_prefix("eth_") {
            Some(rest) if !self.pci => format!("net_{rest}"),
            _ => self.name().to_string(),
        }
    }

    /// The `key=value` arguments after the name, in order (a bracketed list stays one value).
    pub fn args(&self) -> Vec<(&str, &str)> {
        let Some(args) = self.devargs.get(self.name_len + 1..) else {
            return Vec::new();
        };
        split_args(args)
            .into_iter()
            .map(|item| item.split_once('=').unwrap_or((item, "")))
            .collect()
    }

    /// What this device takes for itself that no other port may also take: a host
    /// interface (`net_af_packet`/`net_tap`/`net_pcap`'s `iface`, `rx_iface`, `tx_iface`), a
    /// vhost-user socket (`net_vhost`'s `iface`) or a capture it writes (`net_pcap`'s
    /// `tx_pcap`, other than `/dev/null`). Two ports on one of them would steal each other's
    /// frames or interleave them in one file. (`net_memif` and `net_virtio_user` share sockets by design.)
    pub fn claims(&self) -> Vec<Claim> {
        let driver = match self.canonical_name().trim_end_matches(|c: char| c.is_ascii_digit()) {
            "net_tun" => "net_tap".to_string(),
            d => d.to_string(),
        };
        let mut out = Vec::new();
        for (k, v) in self.args() {
            let claim = match (driver.as_str(), k) {
                ("net_af_packet" | "net_tap", "iface") => Claim::Interface(v.to_string()),
                ("net_pcap", "iface" | "rx_iface" | "rx_iface_in" | "tx_iface") => Claim::Interface(v.to_string()),
                // /dev/null discards whatever is written to it: any number of ports may.
                ("net_pcap", "tx_pcap") if v == "/dev/null" => continue,
                ("net_pcap", "tx_pcap") => Claim::File(v.into()),
                ("net_vhost", "iface") => Claim::File(v.into()),
                _ => continue,
            };
            if !out.contains(&claim) {
                out.push(claim);
            }
        }
        out
    }

    /// Where the port's received frames come from, as far as the device string says: whether
    /// a run can know when they end ([`RxSource`]).
    pub fn rx_source(&self) -> RxSource {
        let driver = self.canonical_name();
        if self.pci {
            return RxSource::Endless(format!("{} is a NIC", self.name()));
        }
        if driver.trim_end_matches(|c: char| c.is_ascii_digit()) != "net_pcap" {
            return RxSource::Endless(format!(
                "{} ({}) receives from a device",
                self.name(),
                self.driver().unwrap_or("?")
            ));
        }
        let args = self.args();
        let files: Vec<&str> = args.iter().filter(|(k, _)| *k == "rx_pcap").map(|(_, v)| *v).collect();
        if let Some((k, v)) = args
            .iter()
            .find(|(k, _)| matches!(*k, "iface" | "rx_iface" | "rx_iface_in"))
        {
            return RxSource::Endless(format!("{} reads interface {v} ({k})", self.name()));
        }
        if args.iter().any(|(k, v)| *k == "infinite_rx" && *v != "0") {
            return RxSource::Endless(format!("{} replays its capture for ever (infinite_rx=1)", self.name()));
        }
        match files.as_slice() {
            [] => RxSource::Nothing,
            [one] => RxSource::File(one.into()),
            _ => RxSource::Endless(format!(
                "{} has {} rx_pcap files (one receive queue each; the switch reads the first)",
                self.name(),
                files.len()
            )),
        }
    }

    /// For a virtual device, the driver its name asks for: the name without the instance
    /// number (`net_ring0` → `net_ring`). DPDK matches drivers by name prefix, so this is a
    /// good guess for messages, not an authority.
    pub fn driver(&self) -> Option<&str> {
        if self.pci {
            return None;
        }
        Some(self.name().trim_end_matches(|c: char| c.is_ascii_digit()))
    }
}

/// Where a port's received frames come from ([`DeviceSpec::rx_source`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RxSource {
    /// A capture file the driver reads once, as fast as it is polled (`net_pcap`'s `rx_pcap`
    /// without `infinite_rx=1`): its frames end.
    File(std::path::PathBuf),
    /// Nothing: the device receives no frames (`net_pcap` with only a `tx_pcap`).
    Nothing,
    /// A source with no end the switch can see (a NIC, an interface, a capture replayed for
    /// ever), with what it is, for messages.
    Endless(String),
}

/// Something a device takes for itself ([`DeviceSpec::claims`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Claim {
    /// A host network interface, by name.
    Interface(String),
    /// A file or socket, by path.
    File(std::path::PathBuf),
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Claim::Interface(i) => write!(f, "interface {i}"),
            Claim::File(p) => write!(f, "file {}", p.display()),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.devargs)
    }
}

/// `DDDD:BB:DD.F` or `BB:DD.F` (hex), returned in the domain form DPDK names ports by.
fn pci_address(name: &str) -> Option<String> {
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    let parts: Vec<&str> = name.split(':').collect();
    let (domain, bus, rest) = match parts.as_slice() {
        [d, b, r] => (*d, *b, *r),
        [b, r] => ("0000", *b, *r),
        _ => return None,
    };
    let (dev, func) = rest.split_once('.')?;
    let func_ok = func.len() == 1 && matches!(func.as_bytes()[0], b'0'..=b'7');
    (hex(domain, 4) && hex(bus, 2) && hex(dev, 2) && func_ok)
        .then(|| format!("{}:{}:{}.{}", domain, bus, dev, func).to_ascii_lowercase())
}

fn check_vdev_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the device name before the first ',' is empty".into());
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
        return Err(format!("'{name}' contains {c:?}"));
    }
    // Every Ethernet virtual device driver in DPDK is net_*, some with a legacy eth_* alias.
    let driver = name.strip_prefix("net_").or(name.strip_prefix("eth_"));
    match driver {
        Some(rest) if rest.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) => Ok(()),
        _ => Err(format!("'{name}' does not name an Ethernet driver")),
    }
}

/// `key[=value]` items separated by commas; a value may hold a bracketed list with commas
/// (`key=[a,b]`), as DPDK's kvargs allow.
fn check_args(args: &str) -> Result<(), String> {
    let mut depth = 0i32;
    for c in args.chars() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ']' in '{args}'"));
                }
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '[' in '{args}'"));
    }
    for item in split_args(args) {
        let key = item.split_once('=').map_or(item, |(k, _)| k);
        if item.is_empty() {
            return Err("an empty argument (two commas, or a trailing comma)".into());
        }
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("argument '{item}' has no valid key (key=value)"));
        }
        if item.ends_with('=') {
            return Err(format!("argument '{item}' has no value"));
        }
    }
    Ok(())
}

/// The items of an argument list, split at the commas outside brackets.
fn split_args(args: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in args.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&args[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&args[start..]);
    items
}

/// Whether a driver (PMD) for this virtual device is installed in `pmd_dir`, DPDK's plugin
/// directory (`librte_net_ring.so` provides `net_ring`). `None` when the directory cannot
/// be read. Heuristic, for wording errors: a driver `net_virtio_user` lives in
/// `librte_net_virtio.so`, so a library whose name is a prefix of the driver counts;
/// `eth_*` are aliases of `net_*`, and `net_tun` is in the tap driver.
pub fn driver_installed(pmd_dir: &Path, driver: &str) -> Option<bool> {
    let mut driver = match driver.strip_prefix("eth_") {
        Some(rest) => format!("net_{rest}"),
        None => driver.to_string(),
    };
    if driver == "net_tun" {
        driver = "net_tap".into();
    }
    let entries = std::fs::read_dir(pmd_dir).ok()?;
    Some(entries.flatten().any(|e| {
        let file = e.file_name();
        let file = file.to_string_lossy();
        file.strip_prefix("librte_")
            .and_then(|f| f.split_once(".so"))
            .is_some_and(|(lib, _)| lib.starts_with("net_") && driver.starts_with(lib))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_knows_which_inputs_end() {
        let src = |d: &str| DeviceSpec::parse(d).unwrap().rx_source();
        assert_eq!(
            src("net_pcap0,rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/out.pcap"),
            RxSource::File("/tmp/in.pcap".into())
        );
        assert_eq!(
            src("eth_pcap1,rx_pcap=a.pcap,infinite_rx=0"),
            RxSource::File("a.pcap".into())
        );
        assert_eq!(src("net_pcap0,tx_pcap=/tmp/out.pcap"), RxSource::Nothing);
        let endless = |d: &str, why: &str| match src(d) {
            RxSource::Endless(w) => assert!(w.contains(why), "{d}: {w}"),
            other => panic!("{d}: {other:?}"),
        };
        endless("net_pcap0,rx_pcap=a.pcap,infinite_rx=1", "infinite_rx=1");
        endless("net_pcap0,iface=eth1", "reads interface eth1");
        endless("net_pcap0,rx_iface=eth1,tx_pcap=o.pcap", "reads interface eth1");
        endless("net_pcap0,rx_pcap=a.pcap,rx_pcap=b.pcap", "2 rx_pcap files");
        endless("net_ring0", "net_ring0 (net_ring) receives from a device");
        endless("0000:3b:00.0", "is a NIC");
    }

    #[test]
    fn vdevs_parse() {
        let d = DeviceSpec::parse("net_ring0").unwrap();
        assert_eq!(
            (d.name(), d.devargs(), d.driver(), d.is_pci()),
            ("net_ring0", "net_ring0", Some("net_ring"), false)
        );
        let d = DeviceSpec::parse("net_af_packet1,iface=veth0,qpairs=1").unwrap();
        assert_eq!(d.name(), "net_af_packet1");
        assert_eq!(d.driver(), Some("net_af_packet"));
        assert_eq!(d.devargs(), "net_af_packet1,iface=veth0,qpairs=1");
        let d = DeviceSpec::parse("net_memif0,role=server,socket=/run/m.sock").unwrap();
        assert_eq!(d.name(), "net_memif0");
        assert!(DeviceSpec::parse("eth_null3").is_ok());
        assert!(DeviceSpec::parse("net_bonding0,slave=[a,b],mode=1").is_ok());
    }

    #[test]
    fn pci_addresses_parse_in_domain_form() {
        let d = DeviceSpec::parse("0000:3B:00.1").unwrap();
        assert_eq!((d.name(), d.is_pci(), d.driver()), ("0000:3b:00.1", true, None));
        let d = DeviceSpec::parse("3b:00.0,txq_inline=128").unwrap();
        assert_eq!(d.name(), "0000:3b:00.0");
        assert_eq!(d.devargs(), "0000:3b:00.0,txq_inline=128");
    }

    #[test]
    fn malformed_strings_say_what_was_expected() {
        for bad in [
            "",
            "net_ring0,",
            "net_ring0,,a=b",
            "net_ring0,=x",
            "net_ring0,a=",
            "net ring0",
            "ring0",
            "net_",
            "net_0",
            "net_ring-0",
            "0000:3b:00.8",
            "net_bonding0,slave=[a,b",
            ",iface=x",
        ] {
            let e = DeviceSpec::parse(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::MalformedDevice, "{bad}");
            let m = e.to_string();
            assert!(m.contains(&format!("'{bad}'")), "{m}");
            assert!(m.contains("net_ring0") && m.contains("PCI address"), "{m}");
        }
    }

    #[test]
    fn installed_drivers_are_recognised_by_library_name() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "librte_net_ring.so.23",
            "librte_net_virtio.so",
            "librte_net_tap.so.23.0",
            "librte_bus_vdev.so",
        ] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let has = |d| driver_installed(dir.path(), d).unwrap();
        assert!(has("net_ring"));
        assert!(has("eth_ring"));
        assert!(has("net_virtio_user"));
        assert!(has("net_tun"));
        assert!(!has("net_foo"));
        assert!(!has("net_bus_vdev"));
        assert_eq!(driver_installed(&dir.path().join("nope"), "net_ring"), None);
    }
}
