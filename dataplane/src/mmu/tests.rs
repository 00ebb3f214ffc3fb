use super::*;
use controlplane::{Config, NUM_TC};
use proptest::prelude::*;

fn cfg() -> Config {
    crate::test_config()
}

/// The whole switch's accounting in one value, as the switch composes it from its owners:
/// each port's ingress and egress accounts and the pool, driven through [`admit`] and the two
/// sides' releases exactly as the pipeline does.
struct Mmu {
    pool: SharedPool,
    ins: Vec<PgAccount>,
    outs: Vec<QueueAccount>,
}

impl Mmu {
    fn new(cfg: &Config) -> Self {
        let (pool, ins, outs) = build(cfg);
        Mmu { pool, ins, outs }
    }

    fn cells_for(&self, len: usize) -> u32 {
        self.pool.cells_for(len)
    }

    fn admit(
        &mut self,
        inp: usize,
        pg: usize,
        out: usize,
        q: usize,
        cells: u32,
        bytes: u32,
    ) -> Result<Admitted, DropReason> {
        admit(
            &mut self.ins[inp],
            pg,
            &mut self.outs[out],
            q,
            &mut self.pool,
            cells,
            bytes,
        )
    }

    /// Egress release, then the ingress release it sends back; true when the PG may resume.
    fn release(&mut self, inp: usize, pg: usize, out: usize, q: usize, cells: u32, bytes: u32) -> bool {
        self.outs[out].release(q, cells, bytes, &mut self.pool);
        self.ins[inp].release(pg, cells, &mut self.pool);
        self.ins[inp].may_resume(pg, &self.pool)
    }

    fn may_resume(&self, port: usize, pg: usize) -> bool {
        self.ins[port].may_resume(pg, &self.pool)
    }

    fn pg(&self, port: usize, pg: usize) -> &PgUse {
        self.ins[port].pg(pg)
    }

    fn pool(&self) -> PoolUse {
        self.pool.usage()
    }

    fn audit(&self) -> Vec<String> {
        super::audit(&self.pool, &self.ins, &self.outs)
    }

    fn is_empty(&self) -> bool {
        self.pool.is_empty() && self.ins.iter().all(PgAccount::is_empty) && self.outs.iter().all(QueueAccount::is_empty)
    }
}

#[test]
fn lossless_pg_goes_min_shared_headroom_then_drops() {
    let cfg = cfg();
    let mut mmu = Mmu::new(&cfg);
    let headroom = mmu.ins[0].headroom_limit(3);
    assert!(headroom > 0, "default config has headroom on PG 3");
    let mut regions = Vec::new();
    let mut drops = 0;
    // One 1 KiB frame (4 cells) at a time from port 0 PG 3 to port 1 queue 3, never released.
    for _ in 0..10_000 {
        match mmu.admit(0, 3, 1, 3, 4, 1024) {
            Ok(a) => regions.push(a),
            Err(r) => {
                assert_eq!(r, DropReason::HeadroomOverflow);
                drops += 1;
            }
        }
    }
    assert!(drops > 0);
    let first_headroom = regions
        .iter()
        .position(|a| a.region == IngressRegion::Headroom)
        .unwrap();
    assert!(
        regions[first_headroom].wants_xoff,
        "spilling into headroom asks for XOFF"
    );
    assert!(regions[..first_headroom]
        .iter()
        .all(|a| a.region != IngressRegion::Headroom));
    assert!(regions[first_headroom..]
        .iter()
        .all(|a| a.region == IngressRegion::Headroom));
    let pg = mmu.pg(0, 3);
    assert!(
        pg.headroom <= headroom && pg.headroom + 4 > headroom,
        "headroom filled: {} of {headroom}",
        pg.headroom
    );
    // A lone congested PG settles near B·alpha/(1+alpha) of the shared pool.
    let alpha = 1.0 / 8.0;
    let expected = mmu.pool.shared_cells as f64 * alpha / (1.0 + alpha);
    assert!(
        (pg.shared as f64 - expected).abs() <= 8.0,
        "shared {} expected ~{expected}",
        pg.shared
    );
}

#[test]
fn lossy_queue_drops_at_its_egress_limit() {
    let cfg = cfg();
    let mut mmu = Mmu::new(&cfg);
    let mut admitted = 0;
    let reason = loop {
        match mmu.admit(0, 0, 1, 0, 4, 1024) {
            Ok(a) => {
                assert!(!a.wants_xoff, "lossy PGs never ask for PFC");
                admitted += 1;
            }
            Err(r) => break r,
        }
    };
    assert_eq!(reason, DropReason::EgressLimit);
    assert!(admitted > 10);
}

#[test]
fn xon_needs_empty_headroom_and_the_offset() {
    let cfg = cfg();
    let mut mmu = Mmu::new(&cfg);
    let mut n = 0;
    while mmu.pg(0, 3).headroom == 0 {
        mmu.admit(0, 3, 1, 3, 4, 1024).unwrap();
        n += 1;
    }
    assert!(!mmu.may_resume(0, 3));
    let mut resumed_at = None;
    for i in 0..n {
        if mmu.release(0, 3, 1, 3, 4, 1024) && resumed_at.is_none() {
            resumed_at = Some(i);
        }
    }
    let at = resumed_at.expect("resumes before empty");
    assert!(at >= 1, "not while headroom still holds cells");
    assert!(mmu.is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Admit {
        inp: usize,
        pg: usize,
        out: usize,
        q: usize,
        len: u32,
    },
    Release(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..4, prop::sample::select(vec![0usize, 3, 6]), 0usize..4, prop::sample::select(vec![0usize, 3, 6]), 60u32..9000)
            .prop_map(|(inp, pg, out, q, len)| Op::Admit { inp, pg, out, q, len }),
        2 => any::<usize>().prop_map(Op::Release),
    ]
}

proptest! {
    /// Cells are conserved: whatever is admitted and released in whatever order, every PG,
    /// queue, port and pool counter returns to zero when the queues drain, and no counter ever
    /// exceeds its bound on the way.
    #[test]
    fn cells_are_conserved(ops in prop::collection::vec(op(), 1..400)) {
        let cfg = cfg();
        let mut mmu = Mmu::new(&cfg);
        let mut held: Vec<(usize, usize, usize, usize, u32, u32)> = Vec::new();
        for op in ops {
            match op {
                Op::Admit { inp, pg, out, q, len } => {
                    let cells = mmu.cells_for(len as usize);
                    if mmu.admit(inp, pg, out, q, cells, len).is_ok() {
                        held.push((inp, pg, out, q, cells, len));
                    }
                }
                Op::Release(i) if !held.is_empty() => {
                    let (inp, pg, out, q, cells, len) = held.swap_remove(i % held.len());
                    mmu.release(inp, pg, out, q, cells, len);
                }
                Op::Release(_) => {}
            }
            let pool = mmu.pool();
            prop_assert!(pool.used_cells <= pool.total_cells);
            prop_assert!(pool.ingress_shared_cells <= pool.shared_cells);
            prop_assert_eq!(mmu.audit(), Vec::<String>::new());
            let charged: u32 = held.iter().map(|h| h.4).sum();
            prop_assert_eq!(pool.used_cells, charged);
            for port in 0..4 {
                for pg in 0..NUM_TC {
                    prop_assert!(mmu.pg(port, pg).headroom <= mmu.ins[port].headroom_limit(pg));
                }
            }
        }
        for (inp, pg, out, q, cells, len) in held.drain(..) {
            mmu.release(inp, pg, out, q, cells, len);
        }
        prop_assert!(mmu.is_empty(), "{:?}", mmu.pool());
        prop_assert_eq!(mmu.audit(), Vec::<String>::new());
    }
}

/// Releasing more than was admitted is an accounting bug: a debug build (the tests) panics at
/// once; a release build clamps at zero, and the audit shows it instead of hiding it.
#[test]
fn an_over_release_is_loud() {
    let cfg = cfg();
    let mut mmu = Mmu::new(&cfg);
    mmu.admit(0, 3, 1, 3, 4, 1024).expect("admitted");
    mmu.admit(0, 0, 1, 0, 4, 1024).expect("admitted");
    assert_eq!(mmu.audit(), Vec::<String>::new());
    // Both frames' cells returned through one queue and PG: more than either was charged.
    let over = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        mmu.release(0, 3, 1, 3, 8, 2048);
    }));
    if cfg!(debug_assertions) {
        assert!(over.is_err(), "debug builds panic on an over-release");
    } else {
        assert!(!mmu.audit().is_empty(), "the audit shows the clamp");
    }
}
