/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * xwarp XDP steering: the layout of the maps shared by the XDP program
 * (xwarp_steer.bpf.c) and the user-space loader (dataplane/src/xdp/maps.rs,
 * which mirrors every name and number here; a unit test there checks the
 * compiled object against this file).
 *
 * Map               Type                 Key                 Value                      Entries
 * ----------------  -------------------  ------------------  -------------------------  -------------------------
 * xwarp_ports       BPF_MAP_TYPE_HASH    __u16 TCP port,     __u8 xwarp_port_kind       XWARP_PORTS_MAX
 *                                        host byte order
 * xwarp_xsks        BPF_MAP_TYPE_XSKMAP  __u32 rx queue id   __u32 AF_XDP socket fd     XWARP_XSKS_MAX
 *                                                            (written by user space)
 * xwarp_counters    BPF_MAP_TYPE_PERCPU  __u32 0 (one slot)  struct xwarp_counters,     1
 *                   _ARRAY                                   one copy per CPU
 *
 * Verdicts:
 *   - Ethernet (optionally one 802.1Q / 802.1ad tag), IPv4 or IPv6, TCP whose
 *     destination port is a key of xwarp_ports: redirected to
 *     xwarp_xsks[rx_queue_index]. If no socket is bound for that queue the
 *     packet is passed to the kernel and counted in steered_no_socket.
 *   - A header that claims more bytes than the frame holds or holds impossible
 *     values (IPv4 IHL < 5, total length < IHL, TCP data offset < 5, wrong IP
 *     version): dropped and counted in malformed.
 *   - Everything else (ARP, ICMP, UDP, other TCP ports, IP fragments other
 *     than the first, IPv6 with extension headers): XDP_PASS, counted in passed.
 */
#ifndef XWARP_MAPS_H
#define XWARP_MAPS_H

#define XWARP_PROG_NAME "xwarp_steer"

#define XWARP_PORTS_MAX 16384
#define XWARP_XSKS_MAX 64

/* Values of xwarp_ports. Both kinds are steered; the kind is for user space. */
#define XWARP_PORT_LISTEN 1 /* a listening iWARP port */
#define XWARP_PORT_ACTIVE 2 /* a port of the engine's active-open range */

/* Counters, one struct per CPU; user space sums them. All __u64, in this order. */
struct xwarp_counters {
	__u64 redirected;        /* handed to an AF_XDP socket */
	__u64 passed;            /* given to the kernel (not ours) */
	__u64 malformed;         /* dropped: truncated or impossible headers */
	__u64 steered_no_socket; /* steered port, but no socket on this rx queue: passed */
};

#endif
