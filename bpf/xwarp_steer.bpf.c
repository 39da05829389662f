/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * xwarp XDP steering program. Map layout and the rules of which frames are ours (the same
 * table as endpoint::classify): xwarp_maps.h. The numbers in the comments below are the rows
 * of that table. Built by dataplane/build.rs with `clang -O2 -g -target bpf`.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
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

static __always_inline enum verdict classify(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct tcphdr *tcp;
	__u32 ihl_bytes, total, l4_len, daddr;
	__u16 frag, port;

	/* 1 */
	if ((void *)(eth + 1) > data_end)
		return MALFORMED;
	/* 2, 3: a VLAN tag (802.1Q, 802.1ad) is not IPv4 either */
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return NOT_OURS;

	/* 4 */
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return MALFORMED;
	if (ip->version != 4 || ip->ihl < 5)
		return MALFORMED;
	ihl_bytes = ip->ihl * 4;
	total = bpf_ntohs(ip->tot_len);
	if (total < ihl_bytes || (void *)ip + total > data_end)
		return MALFORMED;

	/* 5 */
	daddr = ip->daddr;
	if (!bpf_map_lookup_elem(&xwarp_addrs4, &daddr))
		return NOT_OURS;
	/* 6 */
	if (ip->protocol != IPPROTO_TCP)
		return NOT_OURS;
	/* 7 */
	frag = bpf_ntohs(ip->frag_off);
	if (frag & IP_OFFSET)
		return NOT_OURS;

	/* 8 */
	l4_len = total - ihl_bytes;
	tcp = (void *)ip + ihl_bytes;
	if (l4_len < 4 || (void *)tcp + 4 > data_end)
		return MALFORMED;
	/* 9 */
	port = bpf_ntohs(tcp->dest);
	if (!bpf_map_lookup_elem(&xwarp_ports, &port))
		return NOT_OURS;
	/* 10 */
	if (frag & IP_MF)
		return FRAGMENT;

	/* 11 */
	if (l4_len < sizeof(*tcp) || (void *)(tcp + 1) > data_end)
		return MALFORMED;
	if (tcp->doff < 5 || tcp->doff * 4 > l4_len)
		return MALFORMED;
	/* 12 */
	return OURS;
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
