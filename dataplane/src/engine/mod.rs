//! The per-queue polling engine: our TCP + MPA + DDP over a packet I/O (AF_XDP or an in-memory link).
