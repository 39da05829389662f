//! A connection's state: what runs over its TCP and how far it got ([`ConnState`], with
//! [`MpaPhase`] inside an iWARP one), and how far it is on its way out ([`Closing`]). Each
//! variant holds what exists in it and nothing else: a queue pair only once TCP is established,
//! a listener's backlog and the application's accept deadline only while MPA starts up, a close
//! deadline only once closing.

use std::time::Instant;

use ddp::Qp;

use super::rx_feed::RxFeed;
use crate::endpoint::admission::BacklogSlot;
use crate::endpoint::stream::StreamState;

/// What runs over a connection's TCP, and how far it got. The queue pair is held inline, not
/// boxed: the hot path reaches it without a pointer hop, and a connection is made once.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ConnState {
    /// iWARP, TCP handshake under way: the queue pair is created once TCP is established (its
    /// EMSS sets MULPDU), or never when that fails.
    Handshake,
    /// iWARP, TCP established: the queue pair runs (MPA startup, then DDP and RDMAP).
    Iwarp(Iwarp),
    /// A plain byte stream: no MPA, no queue pair; the application reads and writes TCP's
    /// octets.
    Stream(StreamState),
}

/// An iWARP connection's layers above TCP.
pub(crate) struct Iwarp {
    /// MPA startup, framing, DDP and RDMAP.
    pub qp: Qp,
    /// What has been fed to the queue pair, and out-of-order chunks waiting for their gap.
    pub rx: RxFeed,
    /// Transmit offset TCP has acknowledged.
    pub acked: u64,
    /// How far MPA got.
    pub mpa: MpaPhase,
}

/// How far an iWARP connection's MPA got, as the endpoint tracks it (the queue pair's own
/// phase moves first; the round follows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MpaPhase {
    /// MPA startup under way (Request and Reply).
    Startup {
        /// Its place in the backlog of the listener that accepted it (a responder), until MPA
        /// is up, the connection closes or it is evicted.
        backlog: Option<BacklogSlot>,
        /// Manual accept: the MPA Request was reported; the connection is reset if the
        /// application has not answered by then.
        decide_by: Option<Instant>,
    },
    /// MPA up: the queue pair carries DDP and RDMAP.
    Up,
}

impl ConnState {
    /// The iWARP layers, once TCP is established.
    pub fn iwarp(&self) -> Option<&Iwarp> {
        match self {
            ConnState::Iwarp(i) => Some(i),
            ConnState::Handshake | ConnState::Stream(_) => None,
        }
    }

    /// The iWARP layers, mutably.
    pub fn iwarp_mut(&mut self) -> Option<&mut Iwarp> {
        match self {
            ConnState::Iwarp(i) => Some(i),
            ConnState::Handshake | ConnState::Stream(_) => None,
        }
    }
}

/// How far a connection is on its way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closing {
    /// Not closing.
    No,
    /// On its way out (the application closed it, the stream failed, the peer's FIN came
    /// before MPA was up): TCP closes once the queue pair is idle and TCP's queue is empty.
    /// `deadline`: the application closed it, and it is aborted (RST) if not finished by then.
    Draining { deadline: Option<Instant> },
    /// TCP's close was called (our FIN follows what is queued); `deadline` as above.
    TcpClosed { deadline: Option<Instant> },
}

impl Closing {
    /// On its way out, in either stage.
    pub fn is_closing(self) -> bool {
        self != Closing::No
    }

    /// The application's close deadline, if one is running.
    pub fn deadline(self) -> Option<Instant> {
        match self {
            Closing::No => None,
            Closing::Draining { deadline } | Closing::TcpClosed { deadline } => deadline,
        }
    }

    /// Starts the way out (no deadline); a connection already on it stays where it is.
    pub fn begin(&mut self) {
        if *self == Closing::No {
            *self = Closing::Draining { deadline: None };
        }
    }

    /// Starts the way out with the application's deadline `at` (a deadline already running is
    /// kept).
    pub fn begin_by(&mut self, at: Instant) {
        match self {
            Closing::No => *self = Closing::Draining { deadline: Some(at) },
            Closing::Draining { deadline } | Closing::TcpClosed { deadline } => {
                deadline.get_or_insert(at);
            }
        }
    }

    /// Whether the deadline has passed at `now`; it is then spent (cleared).
    pub fn deadline_passed(&mut self, now: Instant) -> bool {
        match self {
            Closing::Draining { deadline } | Closing::TcpClosed { deadline }
                if deadline.is_some_and(|d| now >= d) =>
            {
                *deadline = None;
                true
            }
            _ => false,
        }
    }

    /// TCP's close is called now.
    pub fn close_tcp(&mut self) {
        *self = Closing::TcpClosed {
            deadline: self.deadline(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn closing_moves_only_forward_and_keeps_the_first_deadline() {
        let t = Instant::now();
        let later = t + Duration::from_secs(1);
        let mut c = Closing::No;
        assert!(!c.is_closing());
        c.begin();
        assert_eq!(c, Closing::Draining { deadline: None });
        c.begin_by(t);
        c.begin_by(later);
        assert_eq!(c.deadline(), Some(t), "the first deadline stays");
        c.close_tcp();
        assert_eq!(c, Closing::TcpClosed { deadline: Some(t) });
        c.begin();
        assert!(
            matches!(c, Closing::TcpClosed { .. }),
            "never back to draining"
        );
        assert!(!c.deadline_passed(t - Duration::from_millis(1)));
        assert!(c.deadline_passed(t));
        assert_eq!(
            c,
            Closing::TcpClosed { deadline: None },
            "a passed deadline is spent"
        );
        assert!(!c.deadline_passed(later));
    }
}
