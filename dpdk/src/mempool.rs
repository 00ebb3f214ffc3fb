//! Packet mempools: the fixed set of mbufs a port receives into and the switch allocates
//! flood copies and PFC frames from.

use crate::eal::{errno, strerror, Eal};
use crate::error::{Error, ErrorKind};
use crate::mbuf::Mbuf;
use dpdk_sys as sys;
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;

/// An mbuf's size besides its data room (the `rte_mbuf` struct), for sizing messages.
const MBUF_HEADER: u64 = std::mem::size_of::<sys::rte_mbuf>() as u64;

/// A pool of packet mbufs. Cloning is cheap and shares the pool (ports hold a clone, so the
/// pool outlives every port receiving into it).
#[derive(Clone)]
pub struct Mempool(Arc<Inner>);

struct Inner {
    ptr: NonNull<sys::rte_mempool>,
    name: String,
    size: u32,
    frame_room: u16,
    ops: String,
}

// SAFETY: DPDK's packet mempools (the default ring_mp_mc ops, and the stack ops
// [`Mempool::with_ops`] is for) are safe for concurrent get and put from any thread; the
// handle itself is immutable.
unsafe impl Send for Inner {}
// SAFETY: as above: every operation through a shared reference is a thread-safe DPDK call.
unsafe impl Sync for Inner {}

/// Why [`Mempool::alloc_copy`] produced no mbuf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// Every mbuf of the pool is in use.
    Exhausted,
    /// The frame is longer than an mbuf's room for data.
    TooLong {
        /// The frame's length.
        len: usize,
        /// The mbuf's room for data.
        room: usize,
    },
}

impl Mempool {
    /// Creates a pool of `n` mbufs (DPDK prefers `n = 2^k - 1`), each with `frame_room`
    /// bytes for a frame after DPDK's standard headroom (`RTE_PKTMBUF_HEADROOM`), and a
    /// per-lcore cache of `cache` free mbufs (0 for none; at most 512 and `n / 1.5`), kept by
    /// DPDK's default mempool handler (`ring_mp_mc` unless the EAL was given
    /// `--mbuf-pool-ops-name`).
    pub fn new(name: &str, n: u32, cache: u32, frame_room: u16) -> Result<Mempool, Error> {
        Mempool::with_ops(name, n, cache, frame_room, None)
    }

    /// As [`Mempool::new`], with the mempool handler `ops` (`"ring_mp_mc"`, `"stack"`,
    /// `"lf_stack"`, ...; None for DPDK's default). Why a program would choose: a ring hands
    /// free mbufs back in the order they were freed, so mbufs freed on one lcore and
    /// allocated on another go round the whole pool and come back cold; a stack hands back
    /// the most recently freed, still in cache (DPDK's "Stack Mempool Driver" guide).
    pub fn with_ops(name: &str, n: u32, cache: u32, frame_room: u16, ops: Option<&str>) -> Result<Mempool, Error> {
        let eal = Eal::require(&format!("mempool '{name}'"))?;
        let fail = |why: String| {
            Error::new(
                ErrorKind::Mempool,
                format!("cannot create mempool '{name}' ({n} mbufs of {frame_room} B): {why}"),
            )
        };
        if n == 0 {
            return Err(fail("a pool needs at least one mbuf".into()));
        }
        if cache > sys::RTE_MEMPOOL_CACHE_MAX_SIZE || f64::from(cache) * 1.5 > f64::from(n) {
            return Err(fail(format!(
                "a per-lcore cache of {cache} is too large: at most {} and n / 1.5",
                sys::RTE_MEMPOOL_CACHE_MAX_SIZE
            )));
        }
        let data_room = u32::from(frame_room) + sys::RTE_PKTMBUF_HEADROOM;
        let data_room = u16::try_from(data_room).map_err(|_| {
            fail(format!(
                "an mbuf holds at most {} B after its {} B headroom",
                u32::from(u16::MAX) - sys::RTE_PKTMBUF_HEADROOM,
                sys::RTE_PKTMBUF_HEADROOM
            ))
        })?;
        let cname = CString::new(name).map_err(|_| fail("the name contains a NUL byte".into()))?;
        let cops = match ops {
            Some(o) => Some(CString::new(o).map_err(|_| fail("the handler's name contains a NUL byte".into()))?),
            None => None,
        };
        // SAFETY: the EAL is running; the names are valid C strings that DPDK copies (or null
        // for the default handler, which `rte_pktmbuf_pool_create_by_ops` then looks up).
        let ptr = unsafe {
            sys::rte_pktmbuf_pool_create_by_ops(
                cname.as_ptr(),
                n,
                cache,
                0,
                data_room,
                socket(eal),
                cops.as_ref().map_or(std::ptr::null(), |o| o.as_ptr()),
            )
        };
        let Some(ptr) = NonNull::new(ptr) else {
            let e = errno();
            let hint = match e {
                libc::EINVAL if ops.is_some() => format!(
                    "no mempool handler '{}' in this DPDK (its driver, e.g. \
                     librte_mempool_stack, is not installed or not loaded), or DPDK's log above \
                     says why",
                    ops.unwrap_or_default()
                ),
                libc::EEXIST => "a pool of that name already exists in this process".into(),
                libc::ENAMETOOLONG => "the name is too long (at most 25 characters)".into(),
                libc::ENOMEM | libc::ENOSPC => format!(
                    "not enough DPDK memory ({} MiB of pool): lower the pool size, or \
                     give the EAL more memory (-m)",
                    (u64::from(n) * (u64::from(data_room) + MBUF_HEADER)) >> 20
                ),
                _ => "DPDK's log above may say more".into(),
            };
            return Err(Error::with_errno(
                ErrorKind::Mempool,
                e,
                format!(
                    "cannot create mempool '{name}' ({n} mbufs of {frame_room} B): {} \
                     (errno {e}); {hint}",
                    strerror(e)
                ),
            ));
        };
        let ops = match ops {
            Some(o) => o.to_string(),
            // SAFETY: the EAL is running; DPDK returns a static string.
            None => unsafe { std::ffi::CStr::from_ptr(sys::rte_mbuf_best_mempool_ops()) }
                .to_string_lossy()
                .into_owned(),
        };
        Ok(Mempool(Arc::new(Inner {
            ptr,
            name: name.to_string(),
            size: n,
            frame_room,
            ops,
        })))
    }

    /// The mempool handler keeping the free mbufs (`ring_mp_mc`, `lf_stack`, ...).
    pub fn ops(&self) -> &str {
        &self.0.ops
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// How many mbufs the pool holds in all.
    pub fn size(&self) -> u32 {
        self.0.size
    }

    /// Bytes available for a frame in each mbuf (after the headroom).
    pub fn frame_room(&self) -> u16 {
        self.0.frame_room
    }

    /// Mbufs free right now (in the pool or in per-lcore caches).
    pub fn available(&self) -> u32 {
        // SAFETY: a valid pool; the count is a racy snapshot, which is all it claims.
        unsafe { sys::rte_mempool_avail_count(self.0.ptr.as_ptr()) }
    }

    /// Mbufs in use right now (held by the program or by ports' receive rings).
    pub fn in_use(&self) -> u32 {
        // SAFETY: as in `available`.
        unsafe { sys::rte_mempool_in_use_count(self.0.ptr.as_ptr()) }
    }

    /// An empty mbuf (length 0, standard headroom), or `None` when the pool is exhausted.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: a valid pool; a non-null result is a fresh mbuf we now own.
        let m = unsafe { sys::rte_pktmbuf_alloc(self.0.ptr.as_ptr()) };
        // SAFETY: a freshly allocated, single-segment mbuf owned by nobody else.
        NonNull::new(m).map(|p| unsafe { Mbuf::from_raw(p.as_ptr()) })
    }

    /// An mbuf holding a copy of `frame` (flood copies, PFC frames).
    pub fn alloc_copy(&self, frame: &[u8]) -> Result<Mbuf, AllocError> {
        let room = usize::from(self.0.frame_room);
        if frame.len() > room {
            return Err(AllocError::TooLong { len: frame.len(), room });
        }
        let mut m = self.alloc().ok_or(AllocError::Exhausted)?;
        if m.set_len(frame.len()).is_err() {
            // Unreachable for a pool made by `new` (room checked above); kept as a guard.
            return Err(AllocError::TooLong {
                len: frame.len(),
                room: m.tailroom(),
            });
        }
        m.data_mut().copy_from_slice(frame);
        Ok(m)
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.0.ptr.as_ptr()
    }
}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mempool")
            .field("name", &self.0.name)
            .field("size", &self.0.size)
            .field("frame_room", &self.0.frame_room)
            .field("ops", &self.0.ops)
            .finish()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Ports hold a clone, so no port receives into the pool any more. Mbufs may still be
        // out (held by the program): freeing the pool under them would make their eventual
        // free write into freed memory, so the pool is then leaked instead. Once this last
        // handle is gone nothing can allocate from the pool, so a count of zero stays zero.
        // SAFETY: a valid pool, no longer reachable by any other handle.
        unsafe {
            if sys::rte_mempool_in_use_count(self.ptr.as_ptr()) == 0 {
                sys::rte_mempool_free(self.ptr.as_ptr());
            }
        }
    }
}

/// The NUMA socket to allocate on: the calling lcore's, or any for a non-EAL thread.
fn socket(_eal: &Eal) -> i32 {
    // SAFETY: the EAL is running.
    let s = unsafe { sys::rte_socket_id() };
    i32::try_from(s).unwrap_or(sys::SOCKET_ID_ANY)
}
