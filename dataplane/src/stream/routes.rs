//! The engine's events for stream connections: accepted connections queued for their
//! listener, and how each connection with a live handle ended.

use std::collections::VecDeque;
use std::net::SocketAddr;

use endpoint::{ConnId, Endpoint, EndpointEvent, FastMap, ListenerId};
use tcp_offload::CloseReason;

use crate::engine::PdHandle;

/// Accepted connections a stream listener holds for `accept` at most; beyond, new ones are
/// reset (and counted by the endpoint as closed).
pub(crate) const MAX_ACCEPT_QUEUE: usize = 1024;

/// What the router keeps for stream listeners and connections (behind the device's lock).
#[derive(Default)]
pub(crate) struct StreamRoutes {
    /// Per stream listener: accepted connections waiting for `accept`.
    pub(crate) accepts: FastMap<ListenerId, VecDeque<(ConnId, SocketAddr)>>,
    /// Connections with a live handle (or a waiting `connect`): `Some` once ended.
    pub(crate) conns: FastMap<ConnId, Option<CloseReason>>,
}

impl StreamRoutes {
    /// Takes the events of stream listeners and connections; gives back the others.
    pub(crate) fn route(
        &mut self,
        ev: EndpointEvent,
        ep: &mut Endpoint<PdHandle>,
    ) -> Option<EndpointEvent> {
        match ev {
            EndpointEvent::Accepted {
                listener,
                conn,
                peer,
            } => match self.accepts.get_mut(&listener) {
                Some(q) if q.len() < MAX_ACCEPT_QUEUE => {
                    q.push_back((conn, peer));
                    None
                }
                Some(_) => {
                    let _ = ep.abort(conn);
                    None
                }
                None => Some(EndpointEvent::Accepted {
                    listener,
                    conn,
                    peer,
                }),
            },
            EndpointEvent::StreamConnected { .. }
            | EndpointEvent::StreamReadable { .. }
            | EndpointEvent::StreamWritable { .. } => None,
            EndpointEvent::PeerClosed { conn } if self.is_stream(conn) => None,
            EndpointEvent::Closed { conn, reason } if self.is_stream(conn) => {
                if let Some(r) = self.conns.get_mut(&conn) {
                    *r = Some(reason);
                }
                for q in self.accepts.values_mut() {
                    q.retain(|&(c, _)| c != conn);
                }
                None
            }
            ev => Some(ev),
        }
    }

    fn is_stream(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn)
            || self
                .accepts
                .values()
                .any(|q| q.iter().any(|&(c, _)| c == conn))
    }
}
