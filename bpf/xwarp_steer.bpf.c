/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * xwarp XDP steering program. Map layout and the rules of which frames are ours (the same
 * table as endpoint::classify): xwarp_maps.h. The numbers in the comments below are the rows
 * of that table. Built by afxdp/build.rs with `clang -O2 -g -target bpf`.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xwarp_maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XWARP_PORTS_MAX);
	__type(key, __u16);
	__type(value, __u8);
} xwarp_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XWARP_ADDRS_MAX);
	__type(key, __u32);
	__type(value, __u8);
} xwarp_addrs4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XWARP_ADDRS_MAX);
	__type(key, struct xwarp_addr6);
	__type(value, __u8);
} xwarp_addrs6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XWARP_XSKS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} xwarp_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xwarp_counters);
} xwarp_counters SEC(".maps");

/* The verdicts of the table in xwarp_maps.h. */
enum verdict { NOT_OURS, MALFORMED, FRAGMENT, OURS };

#define IP_MF 0x2000
#define IP_OFFSET 0x1FFF
#define NEXTHDR_TCP 6
#define NEXTHDR_FRAGMENT 44
#define IP6_FRAG_OFFSET 0xFFF8

/* The IPv6 Fragment header (RFC 8200 section 4.5). */
struct frag6 {
	__u8 nexthdr;
	__u8 reserved;
	__be16 offset_m;
	__be32 id;
};

/* Where the TCP header starts (rules 4 to 9): the caller goes on with rule 10. */
struct transport {
	void *l4;      /* the IP payload behind the headers (the TCP header) */
	__u32 l4_len;  /* its length by the IP header */
	int first_fragment;
};

/* Rules 4, 6, 7 and 9 for IPv4; returns OURS to go on with `t` filled. */
static __always_inline enum verdict ipv4(void *ip_start, void *data_end, __u32 ip_room,
					 struct transport *t)
{
	struct iphdr *ip = ip_start;
	__u32 ihl_bytes, total, daddr;
	__u16 frag;

	/* 4 */
	if ((void *)(ip + 1) > data_end)
		return MALFORMED;
	if (ip->version != 4 || ip->ihl < 5)
		return MALFORMED;
	ihl_bytes = ip->ihl * 4;
	total = bpf_ntohs(ip->tot_len);
	if (total < ihl_bytes || total > ip_room)
		return MALFORMED;
	/* 6 */
	daddr = ip->daddr;
	if (!bpf_map_lookup_elem(&xwarp_addrs4, &daddr))
		return NOT_OURS;
	/* 7 */
	if (ip->protocol != IPPROTO_TCP)
		return NOT_OURS;
	/* 9 */
	frag = bpf_ntohs(ip->frag_off);
	if (frag & IP_OFFSET)
		return NOT_OURS;
	t->l4 = (void *)ip + ihl_bytes;
	t->l4_len = total - ihl_bytes;
	t->first_fragment = (frag & IP_MF) != 0;
	return OURS;
}

/* Rules 5 to 9 for IPv6; returns OURS to go on with `t` filled. */
static __always_inline enum verdict ipv6(void *ip_start, void *data_end, __u32 ip_room,
					 struct transport *t)
{
	struct ipv6hdr *ip6 = ip_start;
	struct xwarp_addr6 daddr;
	struct frag6 *fh;
	__u32 plen;

	/* 5 */
	if ((void *)(ip6 + 1) > data_end)
		return MALFORMED;
	if (ip6->version != 6)
		return MALFORMED;
	plen = bpf_ntohs(ip6->payload_len);
	if (sizeof(*ip6) + plen > ip_room)
		return MALFORMED;
	/* 6 */
	__builtin_memcpy(daddr.addr, &ip6->daddr, sizeof(daddr.addr));
	if (!bpf_map_lookup_elem(&xwarp_addrs6, &daddr))
		return NOT_OURS;
	t->l4 = ip6 + 1;
	t->l4_len = plen;
	t->first_fragment = 0;
	if (ip6->nexthdr == NEXTHDR_TCP)
		return OURS;
	/* 7 */
	if (ip6->nexthdr != NEXTHDR_FRAGMENT)
		return NOT_OURS;
	/* 8 */
	fh = (void *)(ip6 + 1);
	if (plen < sizeof(*fh) || (void *)(fh + 1) > data_end)
		return MALFORMED;
	if (fh->nexthdr != NEXTHDR_TCP)
		return NOT_OURS;
	/* 9 */
	if (bpf_ntohs(fh->offset_m) & IP6_FRAG_OFFSET)
		return NOT_OURS;
	t->l4 = fh + 1;
	t->l4_len = plen - sizeof(*fh);
	t->first_fragment = 1;
	return OURS;
}

static __always_inline enum verdict classify(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct transport t = {};
	struct tcphdr *tcp;
	enum verdict v;
	__u16 port;
	/* Octets behind the Ethernet header in the whole packet: a multi-buffer packet (jumbo
	 * MTU) has only its first buffer between data and data_end, so lengths the IP header
	 * states are checked against this; the headers themselves are read from the first
	 * buffer and bounded by data_end. */
	__u32 ip_room;

	/* 1 */
	if ((void *)(eth + 1) > data_end)
		return MALFORMED;
	ip_room = bpf_xdp_get_buff_len(ctx) - sizeof(*eth);
	/* 2, 3: a VLAN tag (802.1Q, 802.1ad) is neither IPv4 nor IPv6 */
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		v = ipv4(eth + 1, data_end, ip_room, &t);
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		v = ipv6(eth + 1, data_end, ip_room, &t);
	else
		return NOT_OURS;
	if (v != OURS)
		return v;

	/* 10 */
	tcp = t.l4;
	if (t.l4_len < 4 || (void *)tcp + 4 > data_end)
		return MALFORMED;
	/* 11 */
	port = bpf_ntohs(tcp->dest);
	if (!bpf_map_lookup_elem(&xwarp_ports, &port))
		return NOT_OURS;
	/* 12 */
	if (t.first_fragment)
		return FRAGMENT;

	/* 13 */
	if (t.l4_len < sizeof(*tcp) || (void *)(tcp + 1) > data_end)
		return MALFORMED;
	if (tcp->doff < 5 || tcp->doff * 4 > t.l4_len)
		return MALFORMED;
	/* 14 */
	return OURS;
}

/* xdp.frags: loaded with BPF_F_XDP_HAS_FRAGS, so that a jumbo MTU is allowed and packets
 * longer than a page reach the program as multi-buffer packets (AF_XDP sockets bound with
 * XDP_USE_SG take them as chains of frames). */
SEC("xdp.frags")
int xwarp_steer(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct xwarp_counters *c = bpf_map_lookup_elem(&xwarp_counters, &zero);
	enum verdict v = classify(ctx);
	int action;

	if (!c)
		return XDP_PASS; /* cannot happen for a one-slot array; keeps the verifier happy */

	switch (v) {
	case MALFORMED:
		c->malformed++;
		return XDP_DROP;
	case FRAGMENT:
		c->fragments++;
		return XDP_DROP;
	case OURS:
		action = bpf_redirect_map(&xwarp_xsks, ctx->rx_queue_index, XDP_PASS);
		if (action == XDP_REDIRECT)
			c->redirected++;
		else
			c->steered_no_socket++;
		return action;
	default:
		c->passed++;
		return XDP_PASS;
	}
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
