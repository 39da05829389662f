//! What the engine's and the queue pair's tests share: a registered region with its octets,
//! and completions in a form one `assert_eq!` compares.

use crate::ddp::memory::{RegionHandle, VecMemory};
use crate::ddp::stag::Stag;
use crate::ddp::stag_table::{Access, PdId, RegionSpec, StagTable};
use crate::rdmap::completion::{WcOpcode, WcStatus, WorkCompletion};

/// Registers `len` octets at TO `base_to` in protection domain `pd`, filled by `fill(i)`.
pub(crate) fn filled_region(
    tags: &mut StagTable,
    mem: &mut VecMemory,
    (base_to, pd): (u64, PdId),
    len: usize,
    access: Access,
    fill: impl Fn(usize) -> u8,
) -> (RegionHandle, Stag) {
    let spec = RegionSpec {
        base_to,
        len: len as u64,
        access,
        pd,
        stream: None,
    };
    let (h, s) = tags.register(spec).unwrap();
    mem.insert(h, (0..len).map(fill).collect());
    (h, s)
}

/// Each completion's request id, opcode, status and length, in order.
pub(crate) fn summary(wcs: &[WorkCompletion]) -> Vec<(u64, WcOpcode, WcStatus, u32)> {
    wcs.iter()
        .map(|c| (c.wr_id, c.opcode, c.status, c.byte_len))
        .collect()
}
