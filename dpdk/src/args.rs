//! EAL arguments that leave nothing behind, and the hugepage check done before the EAL
//! starts.
//!
//! DPDK's defaults suit a dedicated appliance: it takes every hugepage, writes shared
//! config files under `/var/run/dpdk/rte/`, serves telemetry on a socket, scans the PCI
//! bus and pins the calling thread to CPU 0 (and starts a pinned thread per other CPU).
//! A switch that shares the machine with its test hosts, its own workers and other DPDK
//! processes wants none of that, so [`EalArgs`] asks for private anonymous memory, no
//! shared files, no telemetry, a unique file prefix, and one EAL lcore allowed on every CPU
//! the process may use (the switch pins its own workers).

use crate::device::DeviceSpec;
use crate::error::{Error, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};

/// Memory the EAL reserves when running without hugepages (`--no-huge`): anonymous memory,
/// enough for a few pools of 2 KiB mbufs.
pub const NO_HUGE_MEMORY_MB: u32 = 512;

/// The program name DPDK sees as `argv[0]` (it appears in its log lines).
pub const PROGRAM: &str = "rocesw";

/// A list of EAL arguments (`argv[0]` included), as [`crate::Eal::init`] takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EalArgs {
    args: Vec<String>,
}

impl EalArgs {
    /// Virtual devices only, no hugepages, no PCI: `--no-huge -m 512 --no-pci --no-shconf
    /// --no-telemetry --file-prefix=rocesw-<pid>-<nonce> --lcores=0@(<cpus>) --vdev ...`.
    /// Runs anywhere as root, leaves no file behind. Refuses PCI devices (they need
    /// hugepages: use [`EalArgs::for_pci`]).
    pub fn default_for_vdevs<S: AsRef<str>>(vdevs: &[S]) -> Result<EalArgs, Error> {
        let mut args = base_args();
        args.extend(
            [
                "--no-huge",
                "-m",
                &NO_HUGE_MEMORY_MB.to_string(),
                "--no-pci",
                "--no-shconf",
            ]
            .map(String::from),
        );
        for v in vdevs {
            let d = DeviceSpec::parse(v.as_ref())?;
            if d.is_pci() {
                return Err(pci_needs_hugepages(d.name()));
            }
            args.push("--vdev".into());
            args.push(d.devargs().into());
        }
        Ok(EalArgs { args })
    }

    /// PCI devices (and any virtual devices) with `hugepages_mb` MiB of hugepages:
    /// `--in-memory -m <mb> --no-telemetry --file-prefix=... --lcores=... -a <pci> ...
    /// --vdev ...`. `--in-memory` keeps the hugepage files unlinked and the config
    /// private, so nothing is left behind here either. Checks first that the hugepages
    /// exist, because without them DPDK fails with a message about memory segments that
    /// does not say which setting to change.
    pub fn for_pci<S: AsRef<str>>(devices: &[S], hugepages_mb: u32) -> Result<EalArgs, Error> {
        let specs = devices
            .iter()
            .map(|d| DeviceSpec::parse(d.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let pci: Vec<&str> = specs.iter().filter(|d| d.is_pci()).map(|d| d.name()).collect();
        let who = if pci.is_empty() {
            "the DPDK ports".to_string()
        } else {
            format!("PCI port {}", pci.join(", "))
        };
        if hugepages_mb == 0 {
            return Err(Error::new(
                ErrorKind::Hugepages,
                format!(
                    "{who} needs hugepages for its DMA memory, and none were asked for: \
                     set [run.dpdk] hugepages = true (and memory, e.g. \"1GiB\")"
                ),
            ));
        }
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        check_hugepages(&meminfo, hugepages_mb, &who)?;
        let mut args = base_args();
        args.extend(["--in-memory", "-m", &hugepages_mb.to_string()].map(String::from));
        for d in &specs {
            args.push(if d.is_pci() { "-a" } else { "--vdev" }.into());
            args.push(d.devargs().into());
        }
        Ok(EalArgs { args })
    }

    /// Sets the memory the EAL reserves (`-m`, MiB), replacing the default of
    /// [`EalArgs::default_for_vdevs`].
    pub fn set_memory_mb(&mut self, mb: u32) {
        match self.args.iter().position(|a| a == "-m") {
            Some(i) if i + 1 < self.args.len() => self.args[i + 1] = mb.to_string(),
            _ => self.args.extend(["-m".to_string(), mb.to_string()]),
        }
    }

    /// Appends an argument (e.g. `--log-level=pmd.net.ring:debug`).
    pub fn push(&mut self, arg: impl Into<String>) {
        self.args.push(arg.into());
    }

    /// The arguments, `argv[0]` first.
    pub fn as_slice(&self) -> &[String] {
        &self.args
    }

    /// The arguments, `argv[0]` first.
    pub fn into_vec(self) -> Vec<String> {
        self.args
    }

    /// The value of `--file-prefix`, if present.
    pub fn file_prefix(&self) -> Option<&str> {
        file_prefix(&self.args)
    }
}

/// `--file-prefix=X` or `--file-prefix X` in an argument list.
pub(crate) fn file_prefix(args: &[String]) -> Option<&str> {
    args.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix("--file-prefix=") {
            Some(v)
        } else if a == "--file-prefix" {
            args.get(i + 1).map(String::as_str)
        } else {
            None
        }
    })
}

fn base_args() -> Vec<String> {
    static NONCE: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let nonce = nanos ^ NONCE.fetch_add(1, Ordering::Relaxed).rotate_left(24);
    let mut args = vec![
        PROGRAM.to_string(),
        "--no-telemetry".into(),
        format!("--file-prefix=rocesw-{}-{nonce:08x}", std::process::id()),
    ];
    if let Some(cpus) = allowed_cpus() {
        // One EAL lcore, allowed on every CPU this thread may run on: the EAL would
        // otherwise pin the calling thread (and every thread it later spawns) to CPU 0.
        args.push(format!("--lcores=0@({cpus})"));
    }
    args
}

/// The CPUs the calling thread may run on, as a DPDK cpuset list (`0-3,6`).
fn allowed_cpus() -> Option<String> {
    // SAFETY: cpu_set_t is plain data, valid when zeroed; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into it, and CPU_ISSET reads within it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `c` is below CPU_SETSIZE, the set's size in bits.
    let cpus: Vec<usize> = (0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect();
    cpu_list(&cpus)
}

/// `[0,1,2,5]` → `0-2,5`.
fn cpu_list(cpus: &[usize]) -> Option<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    (!out.is_empty()).then(|| out.join(","))
}

pub(crate) fn pci_needs_hugepages(device: &str) -> Error {
    Error::new(
        ErrorKind::Hugepages,
        format!(
            "PCI port {device} needs hugepages for its DMA memory, but the EAL arguments \
             run without them (--no-huge): set [run.dpdk] hugepages = true (and memory, e.g. \"1GiB\") so the \
             switch starts DPDK with hugepages (EalArgs::for_pci)"
        ),
    )
}

/// Free hugepage memory in MiB, from the text of `/proc/meminfo` (the default page size's
/// pool: `HugePages_Free` × `Hugepagesize`), and the total.
pub(crate) fn hugepages_mb(meminfo: &str) -> (u64, u64) {
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    let page_kb = field("Hugepagesize").unwrap_or(2048);
    let free = field("HugePages_Free").unwrap_or(0);
    let total = field("HugePages_Total").unwrap_or(0);
    (free * page_kb / 1024, total * page_kb / 1024)
}

/// Refuses to start the EAL with hugepages when fewer than `needed_mb` MiB are free,
/// saying how to reserve them.
pub(crate) fn check_hugepages(meminfo: &str, needed_mb: u32, who: &str) -> Result<(), Error> {
    let (free, total) = hugepages_mb(meminfo);
    if free >= u64::from(needed_mb) {
        return Ok(());
    }
    let pages_2m = u64::from(needed_mb).div_ceil(2);
    Err(Error::new(
        ErrorKind::Hugepages,
        format!(
            "{who} needs {needed_mb} MiB of hugepages, but only {free} MiB are free \
             ({total} MiB reserved): reserve them (echo {pages_2m} > \
             /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages, or hugepages= on the \
             kernel command line) or lower [run.dpdk] memory"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vdev_args_leave_nothing_behind_and_pin_nothing() {
        let a = EalArgs::default_for_vdevs(&["net_ring0", "net_null1,size=64"]).unwrap();
        let s = a.as_slice().join(" ");
        for want in [
            "rocesw ",
            "--no-huge -m 512",
            "--no-pci",
            "--no-shconf",
            "--no-telemetry",
            "--vdev net_ring0 --vdev net_null1,size=64",
            "--lcores=0@(",
        ] {
            assert!(s.contains(want), "{want} missing from {s}");
        }
        let prefix = a.file_prefix().unwrap();
        assert!(prefix.starts_with(&format!("rocesw-{}-", std::process::id())));
        let mut b = EalArgs::default_for_vdevs::<&str>(&[]).unwrap();
        b.set_memory_mb(1024);
        assert!(b.as_slice().join(" ").contains("--no-huge -m 1024 --no-pci"));
        assert_ne!(b.file_prefix(), a.file_prefix(), "prefixes are unique");
    }

    #[test]
    fn vdev_args_refuse_pci_and_malformed_devices() {
        let e = EalArgs::default_for_vdevs(&["0000:3b:00.0"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Hugepages);
        assert!(e.to_string().contains("0000:3b:00.0"));
        assert!(e.to_string().contains("[run.dpdk] hugepages"));
        let e = EalArgs::default_for_vdevs(&["net_ring0,,"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MalformedDevice);
    }

    #[test]
    fn pci_args_need_hugepages() {
        let e = EalArgs::for_pci(&["3b:00.0"], 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Hugepages);
        assert!(e.to_string().contains("PCI port 0000:3b:00.0"), "{e}");
        assert!(e.to_string().contains("[run.dpdk] hugepages"), "{e}");
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        if hugepages_mb(&meminfo).0 >= 1024 {
            let a = EalArgs::for_pci(&["3b:00.0", "net_ring0"], 1024).unwrap();
            let s = a.as_slice().join(" ");
            assert!(s.contains("--in-memory -m 1024"), "{s}");
            assert!(s.contains("-a 0000:3b:00.0 --vdev net_ring0"), "{s}");
        } else {
            let e = EalArgs::for_pci(&["3b:00.0"], 1024).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Hugepages);
            assert!(e.to_string().contains("nr_hugepages"), "{e}");
        }
    }

    #[test]
    fn hugepage_check_reads_meminfo() {
        let none = "MemTotal: 1000 kB\nHugePages_Total:       0\nHugePages_Free:        0\n\
                    Hugepagesize:       2048 kB\n";
        assert_eq!(hugepages_mb(none), (0, 0));
        let e = check_hugepages(none, 512, "PCI port 0000:01:00.0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "PCI port 0000:01:00.0 needs 512 MiB of hugepages, but only 0 MiB are free \
             (0 MiB reserved): reserve them (echo 256 > \
             /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages, or hugepages= on the \
             kernel command line) or lower [run.dpdk] memory"
        );
        let some = "HugePages_Total:     512\nHugePages_Free:      300\nHugepagesize:    2048 kB\n";
        assert_eq!(hugepages_mb(some), (600, 1024));
        assert!(check_hugepages(some, 512, "x").is_ok());
        assert!(check_hugepages(some, 700, "x").is_err());
        let gig = "HugePages_Total: 2\nHugePages_Free: 2\nHugepagesize: 1048576 kB\n";
        assert_eq!(hugepages_mb(gig), (2048, 2048));
    }

    #[test]
    fn cpu_lists_use_ranges() {
        assert_eq!(cpu_list(&[0, 1]).unwrap(), "0-1");
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]).unwrap(), "0-2,5,7-8");
        assert_eq!(cpu_list(&[3]).unwrap(), "3");
        assert_eq!(cpu_list(&[]), None);
        assert!(allowed_cpus().is_some());
    }

    #[test]
    fn file_prefix_in_either_form() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(file_prefix(&v(&["x", "--file-prefix=a"])), Some("a"));
        assert_eq!(file_prefix(&v(&["x", "--file-prefix", "b"])), Some("b"));
        assert_eq!(file_prefix(&v(&["x"])), None);
    }
}
