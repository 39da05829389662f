//! The hand-off between lanes: two lanes hand packets to lane 0's bounded inbox while lane 0
//! drains it.

use endpoint::Lane;
use loom::thread;

use super::explore;
use crate::engine::{HandOff, LaneLink};

/// Packets lane 0's inbox holds in the model (small, so that it fills).
const CAPACITY: usize = 2;
/// Packets each handing lane gives.
const EACH: u8 = 2;

/// Drains up to `max` packets of `owner`'s inbox into `got` (a packet is `[lane, seq]`);
/// checks that one drain never finds more than the inbox holds.
fn drain(owner: &mut LaneLink, max: usize, got: &mut Vec<[u8; 2]>) {
    let n = owner.drain(max, &mut |p| got.push([p[0], p[1]]));
    assert!(
        n <= CAPACITY,
        "a drain found {n} packets in an inbox of {CAPACITY}"
    );
}

/// Lanes 1 and 2 each hand two packets to lane 0 (an inbox of two) while lane 0 drains one,
/// then all; once both are done, lane 0 drains again. No packet is lost or seen twice, each
/// lane's packets arrive in their order, what did not fit is counted as dropped and the rest
/// as handed, and the last drain finds every packet left: the length hint, read without the
/// lock, never hides a packet that was handed before.
#[test]
fn two_lanes_hand_off_while_the_owner_drains() {
    explore("handoff: two lanes give, the owner drains", || {
        let h = HandOff::with_capacity(3, CAPACITY);
        let givers: Vec<_> = [1u8, 2]
            .into_iter()
            .map(|lane| {
                let h = h.clone();
                thread::spawn(move || {
                    for seq in 0..EACH {
                        h.give(0, &[lane, seq]);
                    }
                })
            })
            .collect();
        let mut owner = LaneLink::new(Lane::new(0, 3).unwrap(), h.clone());
        let mut got = Vec::new();
        drain(&mut owner, 1, &mut got);
        drain(&mut owner, usize::MAX, &mut got);
        for g in givers {
            g.join().unwrap();
        }
        // Every hand-off happened before this drain: it must see them all.
        drain(&mut owner, usize::MAX, &mut got);
        assert_eq!(
            h.waiting(0),
            (0, 0),
            "the length hint hid a packet from its owner (hint, queued)"
        );

        let c = h.counters();
        assert_eq!(c.handed, got.len() as u64, "handed and received differ");
        assert_eq!(
            c.handed + c.dropped,
            2 * u64::from(EACH),
            "a packet neither handed nor counted as dropped: {c:?}"
        );
        for lane in [1u8, 2] {
            let seqs: Vec<u8> = got.iter().filter(|p| p[0] == lane).map(|p| p[1]).collect();
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "lane {lane}'s packets duplicated or out of order: {seqs:?}"
            );
        }
    });
}
