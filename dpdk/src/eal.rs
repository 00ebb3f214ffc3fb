//! The EAL: DPDK's runtime, started once per process.
//!
//! `rte_eal_init` may run only once in a process (a second call fails, even after
//! `rte_eal_cleanup`), and everything else in DPDK needs it to have run. [`Eal::init`] is the
//! only way in: it starts the EAL on first use and hands out a `&'static Eal`; a later call
//! with the same arguments gets the same EAL, one with other arguments an error naming both
//! (two parts of a program disagreeing about DPDK's set-up is a bug to surface, not to
//! paper over).

use crate::args::{check_hugepages, file_prefix, pci_needs_hugepages};
use crate::device::DeviceSpec;
use crate::error::{Error, ErrorKind};
use dpdk_sys as sys;
use std::ffi::{c_char, CStr, CString};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// The running EAL. Proof that DPDK is initialised in this process.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
}

static EAL: OnceLock<Eal> = OnceLock::new();
/// The message of a failed `rte_eal_init`: DPDK keeps half-parsed state after a failure
/// (a retry is refused or misparsed), so the first failure is final for the process.
static FAILED: OnceLock<String> = OnceLock::new();
/// Serialises first initialisation (a OnceLock alone cannot return an init error).
static INIT: Mutex<()> = Mutex::new(());

impl Eal {
    /// Starts the EAL with `args` (`argv[0]` first; see [`crate::EalArgs`]), or returns the
    /// EAL already running if it was started with the same arguments.
    ///
    /// The thread that starts the EAL becomes its main lcore (lcore 0). A failure of
    /// `rte_eal_init` itself is final: DPDK cannot try again in the same process, so later
    /// calls return an error quoting the first. (Errors found before DPDK runs, such as
    /// missing hugepages, are not final.)
    pub fn init(args: &[String]) -> Result<&'static Eal, Error> {
        let _guard = INIT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(eal) = EAL.get() {
            if eal.args == args {
                return Ok(eal);
            }
            return Err(Error::new(
                ErrorKind::EalState,
                format!(
                    "DPDK's EAL is already running in this process with `{}`; it starts once \
                     per process, so it cannot also start with `{}`: give every part of the \
                     program the same EAL arguments",
                    eal.args.join(" "),
                    args.join(" ")
                ),
            ));
        }
        if let Some(first) = FAILED.get() {
            return Err(Error::new(
                ErrorKind::EalState,
                format!(
                    "DPDK's EAL already failed to start in this process and cannot be \
                     started again (not even with `{}`): fix the first error and restart \
                     the program. The first error: {first}",
                    args.join(" ")
                ),
            ));
        }
        preflight(args)?;

        let cargs = args
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| Error::new(ErrorKind::Eal, format!("an EAL argument contains a NUL byte: {args:?}")))?;
        // The EAL keeps pointers into argv (getopt permutes it in place and some options
        // keep their value), so the strings and the array live as long as the process.
        let cargs: &'static [CString] = Box::leak(cargs.into_boxed_slice());
        let mut argv: Vec<*mut c_char> = cargs.iter().map(|c| c.as_ptr().cast_mut()).collect();
        argv.push(std::ptr::null_mut());
        let argv: &'static mut [*mut c_char] = Box::leak(argv.into_boxed_slice());
        let argc = i32::try_from(args.len()).expect("fewer than 2^31 EAL arguments");

        // SAFETY: argv holds argc valid NUL-terminated strings followed by a null pointer,
        // all alive for the rest of the process; INIT serialises this call with itself.
        let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            let e = eal_error(errno(), args);
            // A failed start leaves its (empty) runtime directory behind too.
            remove_runtime_dir(args);
            let _ = FAILED.set(e.to_string());
            return Err(e);
        }
        remove_runtime_dir(args);
        Ok(EAL.get_or_init(|| Eal { args: args.to_vec() }))
    }

    /// The EAL, if [`Eal::init`] has succeeded in this process.
    pub fn get() -> Option<&'static Eal> {
        EAL.get()
    }

    /// The EAL, or an error saying it must be started first.
    pub(crate) fn require(what: &str) -> Result<&'static Eal, Error> {
        Eal::get().ok_or_else(|| {
            Error::new(
                ErrorKind::EalState,
                format!("{what}: DPDK's EAL is not running; call Eal::init first"),
            )
        })
    }

    /// The arguments the EAL was started with.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// DPDK's driver plugin directory, where the PMDs this DPDK can load live.
    pub fn pmd_dir() -> &'static str {
        // SAFETY: the shim returns a pointer to a string literal (or "").
        let path = unsafe { CStr::from_ptr(sys::rocesw_rte_pmd_path()) };
        path.to_str().unwrap_or("")
    }

    /// Adds a device after start-up (hotplug), as `--vdev`/`-a` would have at start.
    pub fn probe(&self, device: &DeviceSpec) -> Result<(), Error> {
        let c = CString::new(device.devargs()).expect("device strings have no NUL");
        // SAFETY: a valid C string; the EAL is running.
        let ret = unsafe { sys::rte_dev_probe(c.as_ptr()) };
        if ret < 0 {
            return Err(crate::port::probe_error(device, -ret));
        }
        Ok(())
    }

    /// Makes the calling thread an EAL thread (an lcore of its own) until the guard drops.
    /// Mempools keep a per-lcore cache of free mbufs; a thread DPDK does not know takes
    /// and returns every mbuf through the pool's shared ring instead, which is slower.
    pub fn register_thread(&self) -> Result<LcoreGuard, Error> {
        if let Some(id) = lcore_id() {
            return Ok(LcoreGuard {
                id,
                registered_here: false,
                _not_send: PhantomData,
            });
        }
        // SAFETY: the EAL is running; registration is per calling thread.
        if unsafe { sys::rte_thread_register() } != 0 {
            let e = errno();
            return Err(Error::with_errno(
                ErrorKind::EalState,
                e,
                format!(
                    "cannot make this thread a DPDK lcore: {} (all RTE_MAX_LCORE lcore ids \
                     are taken?)",
                    strerror(e)
                ),
            ));
        }
        Ok(LcoreGuard {
            id: lcore_id().unwrap_or(u32::MAX),
            registered_here: true,
            _not_send: PhantomData,
        })
    }
}

/// The calling thread's lcore id, `None` for a thread DPDK does not know.
pub fn lcore_id() -> Option<u32> {
    // SAFETY: reads the calling thread's lcore id (a thread-local) through its C wrapper.
    let id = unsafe { sys::rte_lcore_id() };
    (id != u32::MAX).then_some(id)
}

/// A thread registered with the EAL by [`Eal::register_thread`]; unregisters on drop.
#[derive(Debug)]
pub struct LcoreGuard {
    id: u32,
    registered_here: bool,
    /// Registration belongs to the thread that made it.
    _not_send: PhantomData<*const ()>,
}

impl LcoreGuard {
    /// The thread's lcore id.
    pub fn lcore_id(&self) -> u32 {
        self.id
    }
}

impl Drop for LcoreGuard {
    fn drop(&mut self) {
        if self.registered_here {
            // SAFETY: this thread registered itself in register_thread and the guard
            // cannot have left the thread.
            unsafe { sys::rte_thread_unregister() };
        }
    }
}

/// The calling thread's `rte_errno` (a thread-local, read through the shim).
pub(crate) fn errno() -> i32 {
    // SAFETY: the shim reads the calling thread's rte_errno.
    unsafe { sys::rocesw_rte_errno() }
}

/// DPDK's text for an errno (its own codes included), copied out of DPDK's buffer.
pub(crate) fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a NUL-terminated string (static, or in a thread-local
    // buffer that stays valid until this thread calls it again); it is copied at once.
    unsafe { CStr::from_ptr(sys::rte_strerror(errno)) }
        .to_string_lossy()
        .into_owned()
}

/// Refuses what the EAL would fail at less clearly: hugepages that are not there.
fn preflight(args: &[String]) -> Result<(), Error> {
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let pci: Vec<String> = args
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let v = match a.as_str() {
                "-a" | "--allow" | "-w" => args.get(i + 1)?.as_str(),
                _ => a
                    .strip_prefix("--allow=")
                    .or_else(|| a.strip_prefix("-a").filter(|v| !v.is_empty()))?,
            };
            DeviceSpec::parse(v)
                .ok()
                .filter(DeviceSpec::is_pci)
                .map(|d| d.name().to_string())
        })
        .collect();
    if has("--no-huge") {
        if let (Some(dev), false) = (pci.first(), has("--no-pci")) {
            return Err(pci_needs_hugepages(dev));
        }
        return Ok(());
    }
    let who = if pci.is_empty() {
        "DPDK's EAL (started without --no-huge)".to_string()
    } else {
        format!("PCI port {}", pci.join(", "))
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let needed = memory_mb(args).unwrap_or(1);
    check_hugepages(&meminfo, needed, &who)
}

/// The `-m` value in MiB, if given.
fn memory_mb(args: &[String]) -> Option<u32> {
    args.iter().enumerate().find_map(|(i, a)| match a.as_str() {
        "-m" => args.get(i + 1)?.parse().ok(),
        _ => a.strip_prefix("-m")?.parse().ok(),
    })
}

fn eal_error(errno: i32, args: &[String]) -> Error {
    let hint = match errno {
        libc::EACCES | libc::EPERM => "it needs root (or the capabilities to lock memory and open devices)",
        libc::ENOMEM => {
            "not enough memory: with --no-huge lower -m; with hugepages reserve more \
             ([run.dpdk] hugepages)"
        }
        libc::EINVAL => {
            "an EAL argument is invalid (DPDK's log above names it): check [run.dpdk] \
             eal_args"
        }
        libc::EALREADY => {
            "DPDK already started (or failed to start) its EAL once in this process and \
             cannot do it again: restart the program"
        }
        _ => "DPDK's log above gives the reason",
    };
    Error::with_errno(
        ErrorKind::Eal,
        errno,
        format!(
            "DPDK's EAL would not start with `{}`: {} (errno {errno}); {hint}",
            args.join(" "),
            strerror(errno)
        ),
    )
}

/// With `--no-shconf` (or `--in-memory`) the EAL writes nothing into its runtime directory
/// (`/var/run/dpdk/<prefix>` for root) but still creates it; remove it, if empty, so the
/// process leaves nothing behind however it ends. Only for an explicit prefix: a default
/// `rte` directory may belong to another DPDK process.
fn remove_runtime_dir(args: &[String]) {
    let private = args.iter().any(|a| a == "--no-shconf" || a == "--in-memory");
    let Some(prefix) = file_prefix(args) else {
        return;
    };
    if !private || prefix.is_empty() || prefix.contains('/') {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let base = if unsafe { libc::geteuid() } == 0 {
        PathBuf::from("/var/run")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
    };
    // remove_dir refuses a non-empty directory, which is what we want.
    let _ = std::fs::remove_dir(base.join("dpdk").join(prefix));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn pci_without_hugepages_is_refused_before_dpdk_runs() {
        let e = preflight(&v(&["x", "--no-huge", "-a", "0000:01:00.0"])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Hugepages);
        assert!(e.to_string().contains("PCI port 0000:01:00.0"), "{e}");
        let e = preflight(&v(&["x", "--no-huge", "--allow=01:00.1"])).unwrap_err();
        assert!(e.to_string().contains("0000:01:00.1"), "{e}");
        assert!(preflight(&v(&["x", "--no-huge", "--no-pci", "--vdev", "net_null0"])).is_ok());
    }

    #[test]
    fn memory_size_is_read_from_either_form() {
        assert_eq!(memory_mb(&v(&["x", "-m", "512"])), Some(512));
        assert_eq!(memory_mb(&v(&["x", "-m1024"])), Some(1024));
        assert_eq!(memory_mb(&v(&["x"])), None);
    }
}
