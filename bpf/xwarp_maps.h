/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * xwarp XDP steering: the layout of the maps shared by the XDP program
 * (xwarp_steer.bpf.c) and the user-space loader (afxdp/src/maps.rs,
 * which mirrors every name and number here; a unit test there checks the
 * compiled object against this file).
 *
 * Map               Type                 Key                 Value                      Entries
 * ----------------  -------------------  ------------------  -------------------------  -------------------------
 * xwarp_ports       BPF_MAP_TYPE_HASH    __u16 TCP port,     __u8 xwarp_port_kind       XWARP_PORTS_MAX
 *                                        host byte order
 * xwarp_addrs4      BPF_MAP_TYPE_HASH    __u32 IPv4 address, __u8 1                     XWARP_ADDRS_MAX
 *                                        network byte order
 * xwarp_addrs6      BPF_MAP_TYPE_HASH    __u8[16] IPv6       __u8 1                     XWARP_ADDRS_MAX
 *                                        address as on the wire
 * xwarp_xsks        BPF_MAP_TYPE_XSKMAP  __u32 rx queue id   __u32 AF_XDP socket fd     XWARP_XSKS_MAX
 *                                                            (written by user space)
 * xwarp_counters    BPF_MAP_TYPE_PERCPU  __u32 0 (one slot)  struct xwarp_counters,     1
 *                   _ARRAY                                   one copy per CPU
 *
 * The addresses the engine owns (xwarp_addrs4, xwarp_addrs6) are filled by the loader from
 * the device's address; the steered ports (xwarp_ports) are its listening ports and active-open range.
 *
 * Which frames are ours: ONE definition, the same table as the doc comment of the endpoint's
 * classifier (endpoint/src/classify.rs, `endpoint::classify`); a test feeds one corpus to both
 * (afxdp/tests/frame_agreement.rs). Checked in this order; the first rule that matches
 * decides:
 *
 *  #  the frame                                                  verdict    action, counter
 *  1  shorter than an Ethernet header (14 octets)                Malformed  DROP, malformed
 *  2  EtherType 802.1Q or 802.1ad: a VLAN tag (QinQ included)    NotOurs    PASS, passed
 *  3  EtherType neither IPv4 nor IPv6 (ARP, ...)                 NotOurs    PASS, passed
 *  4  IPv4 header: under 20 octets, version not 4, IHL under 5,  Malformed  DROP, malformed
 *     total length under IHL*4 or beyond the frame
 *  5  IPv6 header: under 40 octets, version not 6, 40 + payload  Malformed  DROP, malformed
 *     length beyond the frame
 *  6  destination address not in xwarp_addrs4 / xwarp_addrs6    NotOurs    PASS, passed
 *  7  not TCP: IPv4 protocol not 6; IPv6 Next Header neither 6   NotOurs    PASS, passed
 *     nor 44 (Fragment)
 *  8  IPv6 Fragment header under 8 octets in the payload;        Malformed  DROP, malformed
 *     its Next Header not TCP                                    NotOurs    PASS, passed
 *  9  a later fragment (fragment offset not 0)                   NotOurs    PASS, passed
 * 10  TCP payload (behind a Fragment header, if any) under 4     Malformed  DROP, malformed
 *     octets (no room for the ports)
 * 11  TCP destination port not in xwarp_ports                    NotOurs    PASS, passed
 * 12  a first fragment: IPv4 More Fragments set; any IPv6        Fragment   DROP, fragments
 *     Fragment header (offset 0, atomic ones included)
 * 13  TCP header: TCP payload under 20 octets, data offset under Malformed  DROP, malformed
 *     5 or beyond the TCP payload
 * 14  everything else                                            Ours       REDIRECT to
 *     xwarp_xsks[rx_queue_index], redirected; no socket on that queue: PASS, steered_no_socket
 *
 * Why: the engine sends untagged frames only, so tagged traffic is the kernel's VLAN devices'
 * (2). ARP and ICMPv6 (Neighbour Discovery) are the kernel's: it owns the same address and
 * keeps the neighbour table the loader copies next hops from (3, 7). The endpoint parses TCP
 * right behind the fixed IPv6 header; of the extension headers only Fragment is looked into,
 * the others pass (7, 8). The engine does not reassemble: a first fragment passed to the kernel
 * would be reassembled there and answered with a RST (no socket on the engine's port), so it
 * is dropped and counted and TCP retransmits (12); a later fragment has no ports to match and
 * passes (the kernel's reassembly expires it without its first fragment) (9). IP headers are
 * judged whatever their destination; TCP headers only on a steered port of ours (13).
 * Not part of the rule: the destination MAC, checksums, the reserved flag and TCP options (the
 * endpoint checks those after redirection).
 */
#ifndef XWARP_MAPS_H
#define XWARP_MAPS_H

#define XWARP_PROG_NAME "xwarp_steer"

#define XWARP_PORTS_MAX 16384
#define XWARP_ADDRS_MAX 16
#define XWARP_XSKS_MAX 64

/* Key of xwarp_addrs6: an IPv6 address as on the wire. */
struct xwarp_addr6 {
	__u8 addr[16];
};

/* Values of xwarp_ports. Both kinds are steered; the kind is for user space. */
#define XWARP_PORT_LISTEN 1 /* a listening iWARP port */
#define XWARP_PORT_ACTIVE 2 /* a port of the engine's active-open range */

/* Counters, one struct per CPU; user space sums them. All __u64, in this order. */
struct xwarp_counters {
	__u64 redirected;        /* handed to an AF_XDP socket */
	__u64 passed;            /* given to the kernel (not ours) */
	__u64 malformed;         /* dropped: truncated or impossible headers */
	__u64 steered_no_socket; /* steered port, but no socket on this rx queue: passed */
	__u64 fragments;         /* dropped: a first IPv4/IPv6 fragment to a steered port of ours */
};

#endif
