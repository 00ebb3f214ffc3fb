//! Where a shard's switch transmits: its ports' backends, with the emulated peer shown every
//! frame first and, while a capture runs, a copy of what each port took.

use crate::io::{ForeignFrame, OwnedBurst};
use crate::runtime::capture::{CaptureRing, Dir};
use crate::runtime::emulated::ToHost;
use crate::runtime::shard_port::ShardPort;
use crate::switch::{Switch, TxSink};

/// Sends what the switch releases into the shard's own ports' backends, and shows the PFC
/// frames among them to the port's emulated peer, if it has one. A shard transmits only on
/// ports it owns: another shard's ports never hold a queued frame here.
pub struct PortSink<'a> {
    /// The shard's ports, by port index.
    pub ports: &'a mut [ShardPort],
}

impl TxSink for PortSink<'_> {
    fn room(&mut self, port: usize) -> usize {
        match self.ports[port].io_mut() {
            // A vanished interface takes (and loses) everything: nothing will ever drain it.
            Some(io) if io.gone => usize::MAX,
            Some(io) => io.backend.tx_room(),
            None => usize::MAX,
        }
    }

    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) {
        self.send_owned(port, frame, at_ns);
    }

    /// The burst in one call to the backend: one look-up of the port, one `gone` check.
    fn transmit_owned_burst(&mut self, port: usize, frames: &mut OwnedBurst) {
        let Some(io) = self.ports[port].io_mut() else {
            frames.clear();
            return;
        };
        if io.gone {
            io.tx_dropped += frames.len() as u64;
            frames.clear();
            return;
        }
        let (refused, error) = io.backend.send_owned_burst(frames);
        io.tx_dropped += refused;
        if let Some(e) = error {
            io.fail(e);
        }
    }

    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.transmit_frame(port, frame, at_ns, None);
    }
}

impl PortSink<'_> {
    /// A frame the switch transmits: shown to the port's emulated peer, then handed to the
    /// port; if the port took it and `tap` is a capture of its transmissions, copied there.
    /// Inlined into both sinks, so the plain one (`tap` = `None`) has no capture check.
    #[inline(always)]
    fn transmit_frame(&mut self, port: usize, frame: &[u8], at_ns: u64, tap: Option<&CaptureRing>) {
        if let ShardPort::Emulated(_, em) = &mut self.ports[port] {
            // The frame still goes out on the port (a rocegen host honours PFC itself); the
            // emulated peer is what keeps a late host from costing the switch lossless frames.
            match em.from_switch(frame, at_ns) {
                ToHost::Frame => {}
                ToHost::Nothing => return,
                ToHost::Rewritten(buf, len) => {
                    // What reaches the host (and a capture of the port) is the rewritten frame.
                    if self.send(port, &buf[..len]) {
                        if let Some(tap) = tap {
                            tap.record(Dir::Tx, at_ns, &buf[..len]);
                        }
                    }
                    return;
                }
            }
        }
        if self.send(port, frame) {
            if let Some(tap) = tap {
                tap.record(Dir::Tx, at_ns, frame);
            }
        }
    }

    /// [`TxSink::transmit_owned`]; true if the port took the frame (in its buffer when the
    /// backend can send that kind, else copied by the backend). Only data frames come here,
    /// which an emulated peer passes on as they are.
    #[inline]
    fn send_owned(&mut self, port: usize, frame: ForeignFrame, _at_ns: u64) -> bool {
        let Some(io) = self.ports[port].io_mut() else {
            return false;
        };
        if io.gone {
            io.tx_dropped += 1;
            return false;
        }
        let sent = io.backend.send_owned(frame);
        io.took(sent)
    }

    /// Hands `frame` to the port's backend, and nothing else: what the emulated NIC sends its
    /// host goes here directly. True if the backend took it.
    fn send(&mut self, port: usize, frame: &[u8]) -> bool {
        let Some(io) = self.ports[port].io_mut() else {
            return false;
        };
        if io.gone {
            io.tx_dropped += 1;
            return false;
        }
        let sent = io.backend.send(frame);
        io.took(sent)
    }

    /// Lets `port` transmit what the switch allows at `now`. The capture check is made once
    /// here, per port and round, not per frame: without a capture the sink is the plain
    /// `PortSink`, with one a [`Tapped`] wrapper that also copies what the port took.
    #[inline]
    pub fn transmit_port(&mut self, sw: &mut Switch, port: usize, now: u64) -> usize {
        match self.ports[port].io().and_then(|io| io.tx_tap.clone()) {
            None => sw.transmit(port, now, self),
            Some(tap) => sw.transmit(port, now, &mut Tapped { sink: self, tap: &tap }),
        }
    }

    /// Sends what the emulated NIC tells its host (back-pressure PFC), captured like any frame
    /// the port sends.
    pub fn send_to_host(&mut self, port: usize, frame: &[u8], now: u64) {
        if self.send(port, frame) {
            if let Some(tap) = self.ports[port].io().and_then(|io| io.tx_tap.as_deref()) {
                tap.record(Dir::Tx, now, frame);
            }
        }
    }
}

/// [`PortSink`] for a port whose transmissions are being captured: each frame the port's
/// backend takes is also copied into the capture ring, stamped with its departure time. A frame
/// the backend refused was not sent and is not captured.
struct Tapped<'e, 'a> {
    sink: &'e mut PortSink<'a>,
    tap: &'e CaptureRing,
}

impl TxSink for Tapped<'_, '_> {
    fn room(&mut self, port: usize) -> usize {
        self.sink.room(port)
    }

    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.sink.transmit_frame(port, frame, at_ns, Some(self.tap));
    }

    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) {
        // The buffer is the backend's once sent: copy it first, keep the copy if it was taken.
        let staged = self.tap.stage(Dir::Tx, at_ns, frame.bytes());
        let taken = self.sink.send_owned(port, frame, at_ns);
        self.tap.finish(staged, taken);
    }
}
