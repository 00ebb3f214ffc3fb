//! What a shard keeps about each of its ports' backends: the backend itself, whether it is
//! still there, its link state, and the live captures running on it.

use crate::io::{PortBackend, PortError};
use crate::runtime::capture::CaptureRing;
use controlplane::snapshot::BackendReport;
use std::sync::Arc;

/// Per-port state a shard keeps about its backend.
pub struct PortIo {
    /// The port's index in the config (what the switch's arrays are indexed by).
    pub index: usize,
    /// The port's id (`[[port]] id`): what every message names it by, as the user wrote it.
    pub id: u16,
    /// Where its frames come from and go.
    pub backend: Box<dyn PortBackend + Send>,
    /// Set once the interface has gone away: logged once, then skipped.
    pub gone: bool,
    /// The link state as last read (assumed up until read).
    pub link_up: bool,
    /// Whether the link state has been seen once (the first "down" of a port whose peer has
    /// not started yet, a VM's vhost-user port, is not a warning).
    link_seen: bool,
    /// Frames the backend refused (too long for it) or that found it gone.
    pub tx_dropped: u64,
    /// The backend's receive-ring losses already counted as `rx_ring` drops.
    ring_drops_counted: u64,
    /// Whether the last look found new receive-ring losses (a warning says when they start).
    ring_dropping: bool,
    /// A live capture of the frames the port receives (`rocectl capture`), checked once per
    /// burst: `None` costs the receive path one branch per burst.
    pub rx_tap: Option<Arc<CaptureRing>>,
    /// A live capture of the frames the port takes for transmission.
    pub tx_tap: Option<Arc<CaptureRing>>,
}

impl PortIo {
    /// State for port index `index` (id `id`) on `backend`: up, no capture running.
    pub fn new(index: usize, id: u16, backend: Box<dyn PortBackend + Send>) -> Self {
        PortIo {
            index,
            id,
            backend,
            gone: false,
            link_up: true,
            link_seen: false,
            tx_dropped: 0,
            ring_drops_counted: 0,
            ring_dropping: false,
            rx_tap: None,
            tx_tap: None,
        }
    }

    /// What a send to the backend came to: true if the port took the frame; a frame refused
    /// although there was room (its size) counts a transmit drop, an error stops the port.
    pub fn took(&mut self, sent: Result<bool, PortError>) -> bool {
        match sent {
            Ok(true) => true,
            Ok(false) => {
                self.tx_dropped += 1;
                false
            }
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    /// Stops using the port after error `e` (logged the first time only).
    pub fn fail(&mut self, e: PortError) {
        if !self.gone {
            tracing::error!(port = self.id, interface = self.backend.name(), "port stopped: {e}");
        }
        self.gone = true;
    }

    /// Frames the port's receive ring lost since the last look (the kernel's or the NIC's own
    /// counter: the switch never saw them), for the switch to count as `rx_ring` drops. Warns
    /// when losses start after a look that found none: a lossless frame lost here is as lost
    /// as one the switch dropped, and as loud.
    pub fn take_ring_drops(&mut self) -> u64 {
        let st = self.backend.stats();
        let total = st.rx_kernel_drops.saturating_add(st.imissed);
        let new = total.saturating_sub(self.ring_drops_counted);
        self.ring_drops_counted = self.ring_drops_counted.max(total);
        if new > 0 && !self.ring_dropping {
            tracing::warn!(
                port = self.id,
                interface = self.backend.name(),
                frames = new,
                "receive ring overflowed: frames lost before the switch read them (drop reason rx_ring); \
                 the worker did not poll in time: give it a core nothing else runs on (run.cores)"
            );
        }
        self.ring_dropping = new > 0;
        new
    }

    /// The backend's counters, for reports.
    pub fn report(&mut self) -> BackendReport {
        let mut r = self.backend.stats().report(self.backend.driver(), self.backend.name());
        // The state as last read (`check_link`, about once a second); a vanished port is down.
        r.link_up = self.backend.has_link().then_some(self.link_up && !self.gone);
        r
    }

    /// Logs a change of link state: a port coming up is worth a line as much as one going
    /// down; a port that is down when first looked at (a VM not started yet) is said once at
    /// info level, not as a warning.
    pub fn check_link(&mut self) {
        if self.gone {
            return;
        }
        let up = self.backend.link_up();
        if !self.link_seen {
            self.link_seen = true;
            if !up {
                tracing::info!(interface = self.backend.name(), "link down (waiting for the peer)");
            }
            self.link_up = up;
            return;
        }
        if up != self.link_up {
            if up {
                tracing::info!(interface = self.backend.name(), "link up");
            } else {
                tracing::warn!(interface = self.backend.name(), "link down");
            }
            self.link_up = up;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::PortStats;
    use std::sync::Mutex;

    /// A backend whose kernel ring has lost `drops` frames.
    struct Lossy {
        drops: u64,
    }

    impl PortBackend for Lossy {
        fn recv_burst(&mut self, _: usize, _: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
            Ok(0)
        }
        fn send(&mut self, _: &[u8]) -> Result<bool, PortError> {
            Ok(true)
        }
        fn tx_room(&mut self) -> usize {
            32
        }
        fn flush(&mut self) -> Result<(), PortError> {
            Ok(())
        }
        fn link_up(&mut self) -> bool {
            true
        }
        fn name(&self) -> &str {
            "veth7"
        }
        fn stats(&mut self) -> PortStats {
            PortStats {
                rx_kernel_drops: self.drops,
                ..Default::default()
            }
        }
    }

    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Issue 41 item 11: the `rx_ring` warning named the port's index in the config (`port=2`
    /// for `[[port]] id = 17`), which the user never wrote; it names the id, as every other
    /// message does.
    #[test]
    fn the_rx_ring_warning_names_the_port_id() {
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let mut io = PortIo::new(2, 17, Box::new(Lossy { drops: 5 }));
        let lost = tracing::subscriber::with_default(subscriber, || io.take_ring_drops());
        assert_eq!(lost, 5);
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains("port=17") && !text.contains("port=2") && text.contains("rx_ring"),
            "{text}"
        );
    }
}
