//! TCP authentication: the token compared in constant time, and [`AuthGuard`], which slows a
//! peer's guesses (back-off per local user) and throttles the log lines its failures cause.

use super::{
    Server, AUTH_BACKOFF_FIRST, AUTH_BACKOFF_MAX, AUTH_FORGET, AUTH_LOG_INTERVAL, AUTH_MAX_PEERS, MAX_TCP_CONNECTIONS,
};
use controlplane::loopback::PeerKey;
use controlplane::protocol::{Op, Response};
use mio::Token;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Compares in time independent of where the inputs differ, so response timing does not
/// reveal how much of a guessed token was right.
pub(super) fn same_token(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = (a.len() ^ b.len()) as u8 | u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// Failed TCP authentications, per [`PeerKey`]: how long the peer must wait before its next
/// token is compared (back-off), and when its failures were last logged.
///
/// A peer is the local user that owns the connecting socket, not its address. Every peer of
/// the loopback listener is a local process, and any of them may pick its source address
/// among all of 127.0.0.0/8, so an address is no identity: keyed by address, every loopback
/// peer had to be one peer, and a process guessing tokens kept every TCP client on the host in
/// back-off, the one holding the token included (a guess every 5 ms took `rocectl --tcp` from
/// 5 of 5 to 0 of 20). The kernel records which user created each socket
/// (`controlplane::loopback::peer_uid`): keyed by it, a guesser slows down only its own user's
/// guesses, and a client of another user is never refused unread. A same-user client can be,
/// for at most [`AUTH_BACKOFF_MAX`]; but a process of the token file's owner can read the
/// token anyway. Peers whose user cannot be found share their address's key (all of loopback
/// as one), so none escapes the back-off.
#[derive(Default)]
pub(super) struct AuthGuard {
    pub(super) peers: HashMap<PeerKey, PeerFailures>,
}

pub(super) struct PeerFailures {
    /// Wrong tokens in a row (forgotten after [`AUTH_FORGET`] without one).
    pub(super) wrong: u32,
    /// No token from this peer is compared before then.
    pub(super) blocked_until: Instant,
    /// The last failure of any kind.
    pub(super) last: Instant,
    /// When a failure was last logged, and how many since were not.
    pub(super) logged: Option<Instant>,
    pub(super) unlogged: u64,
}

/// What a failure leads to: log it (with the count of those not logged before it) or not.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LogFailure {
    Now { unlogged: u64 },
    Suppressed,
}

/// The wait after the `wrong`-th wrong token in a row.
pub(super) fn backoff(wrong: u32) -> Duration {
    let doublings = wrong.saturating_sub(1).min(16);
    AUTH_BACKOFF_FIRST.saturating_mul(1 << doublings).min(AUTH_BACKOFF_MAX)
}

impl AuthGuard {
    /// How long `key` must still wait before a token from it is compared; `None`: compare now.
    pub(super) fn blocked(&self, key: PeerKey, now: Instant) -> Option<Duration> {
        let p = self.peers.get(&key)?;
        (p.blocked_until > now).then(|| p.blocked_until - now)
    }

    /// Records a failed authentication of `key`: a wrong token (`wrong`: it was compared, so
    /// the back-off grows) or an attempt refused without comparing (while blocked, or not
    /// `auth`). Says whether to log it.
    pub(super) fn failed(&mut self, key: PeerKey, wrong: bool, now: Instant) -> LogFailure {
        if !self.peers.contains_key(&key) && self.peers.len() >= AUTH_MAX_PEERS {
            self.peers.retain(|_, p| now.duration_since(p.last) < AUTH_FORGET);
            if self.peers.len() >= AUTH_MAX_PEERS {
                if let Some(quiet) = self.peers.iter().min_by_key(|(_, p)| p.last).map(|(k, _)| *k) {
                    self.peers.remove(&quiet);
                }
            }
        }
        let p = self.peers.entry(key).or_insert(PeerFailures {
            wrong: 0,
            blocked_until: now,
            last: now,
            logged: None,
            unlogged: 0,
        });
        if now.duration_since(p.last) >= AUTH_FORGET {
            p.wrong = 0;
        }
        p.last = now;
        if wrong {
            p.wrong = p.wrong.saturating_add(1);
            p.blocked_until = now + backoff(p.wrong);
        }
        if p.logged.is_some_and(|t| now.duration_since(t) < AUTH_LOG_INTERVAL) {
            p.unlogged += 1;
            return LogFailure::Suppressed;
        }
        p.logged = Some(now);
        LogFailure::Now {
            unlogged: std::mem::take(&mut p.unlogged),
        }
    }

    /// Failures not logged yet whose peer's interval is over, as (peer, how many): logged by
    /// the caller, so a burst that stopped is still reported.
    pub(super) fn due_reports(&mut self, now: Instant) -> Vec<(PeerKey, u64)> {
        let mut due = Vec::new();
        for (key, p) in &mut self.peers {
            if p.unlogged > 0 && p.logged.is_some_and(|t| now.duration_since(t) >= AUTH_LOG_INTERVAL) {
                p.logged = Some(now);
                due.push((*key, std::mem::take(&mut p.unlogged)));
            }
        }
        due
    }

    /// When [`AuthGuard::due_reports`] next has something.
    pub(super) fn next_report(&self) -> Option<Instant> {
        let pending = self.peers.values().filter(|p| p.unlogged > 0);
        pending.filter_map(|p| p.logged).map(|t| t + AUTH_LOG_INTERVAL).min()
    }

    /// The right token from `key`: its failures are forgotten.
    pub(super) fn succeeded(&mut self, key: PeerKey) {
        self.peers.remove(&key);
    }
}

impl Server {
    /// The first request of a TCP connection: the right token authenticates it; anything
    /// else is answered once and the connection closed. A token from a peer (its local user,
    /// [`PeerKey`]) that must still wait after a wrong one ([`AuthGuard`]) is refused without
    /// being compared.
    pub(super) fn authenticate(&mut self, token: Token, id: u64, op: &Op) -> Response {
        let now = Instant::now();
        let peer = self
            .conns
            .get(&token)
            .and_then(|c| Some(PeerKey::of(c.local_addr(), c.peer?)));
        let expected = self.tcp.as_ref().map(|(_, t)| t.as_str()).unwrap_or("");
        let wait = peer.and_then(|ip| self.auth_guard.blocked(ip, now));
        // (the answer, whether it authenticated, whether it is a failed authentication and
        // whether a token was compared and found wrong)
        let (reply, ok, failed, wrong) = match (op, wait) {
            (Op::Auth { .. }, Some(wait)) => (
                Response::err(
                    Some(id),
                    format!(
                        "authentication refused: too many wrong tokens from your user; retry in {} ms",
                        wait.as_millis().max(1)
                    ),
                ),
                false,
                true,
                false,
            ),
            (Op::Auth { token: t }, None) if !expected.is_empty() && same_token(t.trim(), expected) => {
                if let Some(key) = peer {
                    self.auth_guard.succeeded(key);
                }
                let authenticated = self.conns.values().filter(|c| c.tcp && c.authed && !c.closed).count();
                if authenticated >= MAX_TCP_CONNECTIONS {
                    self.refuse("too many authenticated TCP connections");
                    let e = format!(
                        "the switch serves at most {MAX_TCP_CONNECTIONS} authenticated TCP connections at once; \
                         close one, or retry later"
                    );
                    (Response::err(Some(id), e), false, false, false)
                } else {
                    let r = Response::ok(id, serde_json::json!({ "authenticated": true }));
                    (r, true, false, false)
                }
            }
            (Op::Auth { .. }, None) => (
                Response::err(Some(id), "authentication failed: wrong token; connection closed"),
                false,
                true,
                true,
            ),
            _ => (
                Response::err(
                    Some(id),
                    "authentication required: the first request on a TCP connection must be `auth` with the right token",
                ),
                false,
                true,
                false,
            ),
        };
        if let Some(c) = self.conns.get_mut(&token) {
            c.authed = ok;
            c.close_when_flushed = !ok;
        }
        if let (true, Some(key)) = (failed, peer) {
            if let LogFailure::Now { unlogged } = self.auth_guard.failed(key, wrong, now) {
                let more = if unlogged > 0 {
                    format!(" ({unlogged} more since the last such line)")
                } else {
                    String::new()
                };
                tracing::warn!(
                    "control over TCP: failed authentication from {key}: {}{more}",
                    reply.error.as_deref().unwrap_or("refused")
                );
            }
        }
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of a peer at `s` whose user is unknown.
    fn ip(s: &str) -> PeerKey {
        PeerKey::from_parts(s.parse().unwrap(), None)
    }

    #[test]
    fn the_back_off_doubles_to_its_cap() {
        let ms: Vec<u128> = (1..=8).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(backoff(u32::MAX), AUTH_BACKOFF_MAX);
    }

    #[test]
    fn a_wrong_token_blocks_its_peer_until_the_back_off_ends() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        let a = ip("10.0.0.1");
        assert_eq!(g.blocked(a, t0), None);
        g.failed(a, true, t0);
        assert_eq!(g.blocked(a, t0), Some(AUTH_BACKOFF_FIRST));
        assert_eq!(g.blocked(ip("10.0.0.2"), t0), None, "another peer is not blocked");
        // Attempts refused without comparing do not lengthen it.
        g.failed(a, false, t0 + Duration::from_millis(50));
        assert_eq!(
            g.blocked(a, t0 + Duration::from_millis(50)),
            Some(Duration::from_millis(50))
        );
        assert_eq!(g.blocked(a, t0 + AUTH_BACKOFF_FIRST), None);
        // The next wrong token doubles it; the right one clears it.
        let t1 = t0 + AUTH_BACKOFF_FIRST;
        g.failed(a, true, t1);
        assert_eq!(g.blocked(a, t1), Some(2 * AUTH_BACKOFF_FIRST));
        g.succeeded(a);
        assert_eq!(g.blocked(a, t1), None);
        g.failed(a, true, t1);
        assert_eq!(
            g.blocked(a, t1),
            Some(AUTH_BACKOFF_FIRST),
            "starts over after a success"
        );
        // Forgotten after a quiet spell.
        for k in 0..10 {
            g.failed(a, true, t1 + Duration::from_secs(k * 3));
        }
        let later = t1 + Duration::from_secs(27) + AUTH_FORGET;
        g.failed(a, true, later);
        assert_eq!(g.blocked(a, later), Some(AUTH_BACKOFF_FIRST));
    }

    /// Without a known user, every loopback address is one peer (a local process may pick
    /// any of them).
    #[test]
    fn every_loopback_address_of_an_unknown_user_is_one_peer() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        g.failed(ip("127.0.0.1"), true, t0);
        for other in ["127.0.0.2", "127.255.3.4", "::ffff:127.0.0.9"] {
            assert!(g.blocked(ip(other), t0).is_some(), "{other}");
        }
        assert!(g.blocked(ip("::1"), t0).is_none());
    }

    /// Issue 46 item 8, the kernel's answer injected: `nobody`'s wrong tokens from sockets the
    /// kernel reports as uid 0 while they close are the unknown peer's, logged so and counted
    /// there; root's back-off never grows from them.
    #[test]
    fn a_closing_peer_reported_as_uid_0_never_costs_root() {
        use controlplane::loopback::owner_uid;
        const LAST_ACK: u8 = 9;
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        let root = PeerKey::User(0);
        for k in 0..50u64 {
            let closing = PeerKey::from_parts("127.0.0.2".parse().unwrap(), owner_uid(LAST_ACK, 0, 0));
            assert_eq!(closing.to_string(), "127.0.0.1 (user unknown)");
            g.failed(closing, true, t0 + Duration::from_millis(5 * k));
        }
        let now = t0 + Duration::from_millis(250);
        assert_eq!(g.blocked(root, now), None, "root pays for nobody's closing sockets");
        assert!(!g.peers.contains_key(&root));
        assert!(
            g.blocked(ip("127.0.0.1"), now).is_some(),
            "the unknown peer escaped the back-off"
        );
    }

    /// Issue 41 item 4: keyed by address, one guesser on the host kept every loopback client
    /// in back-off, the token holder included. Keyed by the socket's user, whatever address
    /// each picks: the guesser's user waits, another user's client does not, nor does a peer
    /// whose user is unknown.
    #[test]
    fn a_guessers_back_off_is_its_own_users() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        let key = |addr: &str, uid| PeerKey::from_parts(addr.parse().unwrap(), Some(uid));
        for k in 0..50u64 {
            g.failed(key("127.0.0.2", 65534), true, t0 + Duration::from_millis(5 * k));
        }
        let now = t0 + Duration::from_millis(250);
        for addr in ["127.0.0.1", "127.0.0.2", "::1"] {
            assert!(g.blocked(key(addr, 65534), now).is_some(), "{addr}");
            assert_eq!(g.blocked(key(addr, 0), now), None, "{addr}");
            assert_eq!(g.blocked(key(addr, 1000), now), None, "{addr}");
        }
        assert_eq!(g.blocked(ip("127.0.0.2"), now), None);
    }

    #[test]
    fn failures_are_logged_once_per_interval_with_a_count() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        let a = ip("127.0.0.1");
        let mut logged = Vec::new();
        // 5000 failures a second for 25 s.
        for k in 0..125_000u64 {
            let now = t0 + Duration::from_micros(200 * k);
            if let LogFailure::Now { unlogged } = g.failed(a, k % 7 == 0, now) {
                logged.push((now.duration_since(t0).as_secs(), unlogged));
            }
        }
        assert_eq!(logged.len(), 3, "{logged:?}");
        assert_eq!(logged[0], (0, 0));
        assert_eq!(logged[1].0, 10);
        assert_eq!(logged[1].1, 50_000 - 1);
        // What was not logged when the burst stopped is reported once the interval is over.
        let end = t0 + Duration::from_secs(25);
        assert_eq!(g.due_reports(end), []);
        let due_at = g.next_report().unwrap();
        assert_eq!(due_at, t0 + Duration::from_secs(30));
        assert_eq!(g.due_reports(due_at), [(a, 25_000 - 1)]);
        assert_eq!(g.next_report(), None);
    }

    #[test]
    fn the_peers_remembered_are_bounded() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        for k in 0..5000u32 {
            let a = PeerKey::User(k);
            g.failed(a, true, t0 + Duration::from_millis(u64::from(k)));
            assert!(g.peers.len() <= AUTH_MAX_PEERS);
        }
        // The most recent ones are kept.
        assert!(g.blocked(PeerKey::User(4999), t0 + Duration::from_secs(5)).is_some());
    }
}
