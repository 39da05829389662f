/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * xwarp XDP steering program. Map layout and verdicts: xwarp_maps.h.
 * Built by dataplane/build.rs with `clang -O2 -g -target bpf`.
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

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XWARP_PORTS_MAX);
	__type(key, __u16);
	__type(value, __u8);
} xwarp_ports SEC(".maps");

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

/* What the parser concluded about a frame. */
enum verdict { NOT_OURS, MALFORMED, STEER };

struct vlan_tag {
	__be16 tci;
	__be16 encapsulated_proto;
};

/* Reads the TCP destination port at `l4` if the TCP header is whole and sane. */
static __always_inline enum verdict tcp_port(void *l4, void *data_end, __u16 *port)
{
	struct tcphdr *tcp = l4;

	if ((void *)(tcp + 1) > data_end)
		return MALFORMED;
	if (tcp->doff < 5 || (void *)tcp + tcp->doff * 4 > data_end)
		return MALFORMED;
	*port = bpf_ntohs(tcp->dest);
	return STEER;
}

static __always_inline enum verdict classify(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3;
	__u16 proto;
	__u16 port = 0;
	enum verdict v;

	if ((void *)(eth + 1) > data_end)
		return MALFORMED;
	proto = bpf_ntohs(eth->h_proto);
	l3 = eth + 1;

	if (proto == ETH_P_8021Q || proto == ETH_P_8021AD) {
		struct vlan_tag *tag = l3;

		if ((void *)(tag + 1) > data_end)
			return MALFORMED;
		proto = bpf_ntohs(tag->encapsulated_proto);
		l3 = tag + 1;
	}

	if (proto == ETH_P_IP) {
		struct iphdr *ip = l3;
		__u32 ihl_bytes;

		if ((void *)(ip + 1) > data_end)
			return MALFORMED;
		if (ip->version != 4 || ip->ihl < 5)
			return MALFORMED;
		ihl_bytes = ip->ihl * 4;
		if (bpf_ntohs(ip->tot_len) < ihl_bytes || l3 + bpf_ntohs(ip->tot_len) > data_end)
			return MALFORMED;
		if (ip->protocol != IPPROTO_TCP)
			return NOT_OURS;
		/* Only the first fragment carries the TCP header; the engine does not reassemble. */
		if (ip->frag_off & bpf_htons(0x1FFF | 0x2000))
			return NOT_OURS;
		v = tcp_port(l3 + ihl_bytes, data_end, &port);
	} else if (proto == ETH_P_IPV6) {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > data_end)
			return MALFORMED;
		if (ip6->version != 6)
			return MALFORMED;
		if ((void *)(ip6 + 1) + bpf_ntohs(ip6->payload_len) > data_end)
			return MALFORMED;
		if (ip6->nexthdr != IPPROTO_TCP)
			return NOT_OURS;
		v = tcp_port(ip6 + 1, data_end, &port);
	} else {
		return NOT_OURS;
	}

	if (v != STEER)
		return v;
	return bpf_map_lookup_elem(&xwarp_ports, &port) ? STEER : NOT_OURS;
}

SEC("xdp")
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
	case STEER:
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
