/* Checks of the verbs API and rdma_cm over xwarp, in one process on 127.0.0.1 (kernel
 * transport). Prints one line per check; exits 1 at the first failed check.
 *   checks misuse PORT  each misuse gets the error or the completion status libibverbs
 *                       documents, and what is not misused keeps working
 *   checks cm PORT      rdma_cm on MPA: private data raw both ways, IRD/ORD offered in the
 *                       Request, a rejection with its private data, a refused connection,
 *                       DISCONNECTED on both sides of a disconnect */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHECK(cond, what)                                                                   \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "FAIL %s (errno %d, line %d)\n", what, errno, __LINE__); \
			exit(1);                                                            \
		}                                                                           \
		printf("ok   %s\n", what);                                                  \
	} while (0)

struct end {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	char *buf;
	struct ibv_mr *mr;
};

static struct sockaddr_in server_addr;
/* max_inline_data of the queue pairs `resources` makes. */
static uint32_t inline_size;

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev)) {
		fprintf(stderr, "FAIL rdma_get_cm_event (errno %d)\n", errno);
		exit(1);
	}
	if (ev->event != want) {
		fprintf(stderr, "FAIL expected %s, got %s (status %d)\n", rdma_event_str(want),
			rdma_event_str(ev->event), ev->status);
		exit(1);
	}
	return ev;
}

static void resources(struct end *e, struct ibv_context *ctx)
{
	struct ibv_qp_init_attr attr = {0};
	e->pd = ibv_alloc_pd(ctx);
	e->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	e->buf = calloc(1, 65536);
	e->mr = ibv_reg_mr(e->pd, e->buf, 65536,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!e->pd || !e->cq || !e->mr) {
		fprintf(stderr, "FAIL resources (errno %d)\n", errno);
		exit(1);
	}
	attr.send_cq = e->cq;
	attr.recv_cq = e->cq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = 16;
	attr.cap.max_recv_wr = 16;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = inline_size;
	if (rdma_create_qp(e->id, e->pd, &attr)) {
		fprintf(stderr, "FAIL rdma_create_qp (errno %d)\n", errno);
		exit(1);
	}
}

static int post_recv(struct end *e, struct ibv_mr *mr, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)mr->addr, .length = 4096, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(e->id->qp, &wr, &bad);
}

static int post_send(struct end *e, uint32_t lkey, uint64_t wr_id, int opcode, int flags)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = 64, .lkey = lkey};
	struct ibv_send_wr wr = {0}, *bad = NULL;
	int rc;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = opcode;
	wr.send_flags = IBV_SEND_SIGNALED | flags;
	rc = ibv_post_send(e->id->qp, &wr, &bad);
	if (rc && bad != &wr) {
		fprintf(stderr, "FAIL bad_wr not set\n");
		exit(1);
	}
	return rc;
}

static struct ibv_wc wait_wc(struct end *e)
{
	struct ibv_wc wc;
	for (long i = 0; i < 200000000; i++) {
		int n = ibv_poll_cq(e->cq, 1, &wc);
		if (n < 0) {
			fprintf(stderr, "FAIL ibv_poll_cq %d\n", n);
			exit(1);
		}
		if (n == 1)
			return wc;
	}
	fprintf(stderr, "FAIL no completion\n");
	exit(1);
}

/* A client id resolved towards the server, with its queue pair. */
static void client(struct end *c)
{
	c->ch = rdma_create_event_channel();
	rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP);
	rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&server_addr, 1000);
	rdma_ack_cm_event(next_event(c->ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	rdma_resolve_route(c->id, 1000);
	rdma_ack_cm_event(next_event(c->ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	resources(c, c->id->verbs);
}

/* A connected pair: client c to server s, both with their resources; s has `recvs` receives
 * posted before the accept. */
static void connect_pair(struct end *c, struct end *s, int recvs)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *listen_id;
	struct rdma_conn_param param = {0};

	s->ch = rdma_create_event_channel();
	if (rdma_create_id(s->ch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, (struct sockaddr *)&server_addr) || rdma_listen(listen_id, 1)) {
		fprintf(stderr, "FAIL listen (errno %d)\n", errno);
		exit(1);
	}
	client(c);
	param.responder_resources = 1;
	param.initiator_depth = 1;
	param.retry_count = 7;
	if (rdma_connect(c->id, &param)) {
		fprintf(stderr, "FAIL rdma_connect (errno %d)\n", errno);
		exit(1);
	}
	ev = next_event(s->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s->id = ev->id;
	rdma_ack_cm_event(ev);
	resources(s, s->id->verbs);
	for (int i = 0; i < recvs; i++)
		if (post_recv(s, s->mr, 100 + i)) {
			fprintf(stderr, "FAIL post_recv before accept\n");
			exit(1);
		}
	if (rdma_accept(s->id, NULL)) {
		fprintf(stderr, "FAIL rdma_accept (errno %d)\n", errno);
		exit(1);
	}
	rdma_ack_cm_event(next_event(s->ch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(next_event(c->ch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_destroy_id(listen_id);
}

static int misuse(void)
{
	struct end c = {0}, s = {0}, c2 = {0}, s2 = {0};
	struct ibv_wc wc;
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	struct ibv_qp_init_attr ud = {0};
	struct ibv_srq_init_attr srq = {0};
	struct ibv_mr *doomed;
	char *doomed_buf;

	/* Unsupported requests: a clear errno, nothing created. */
	connect_pair(&c, &s, 2);
	ud.send_cq = c.cq;
	ud.recv_cq = c.cq;
	ud.qp_type = IBV_QPT_UD;
	ud.cap.max_send_wr = 1;
	errno = 0;
	CHECK(!ibv_create_qp(c.pd, &ud) && errno == EOPNOTSUPP, "a UD queue pair: NULL, EOPNOTSUPP");
	srq.attr.max_wr = 1;
	errno = 0;
	CHECK(!ibv_create_srq(c.pd, &srq) && errno == EOPNOTSUPP, "an SRQ: NULL, EOPNOTSUPP");
	errno = 0;
	CHECK(!ibv_reg_mr(c.pd, c.buf, 4096, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
	      "remote write without local write: NULL, EINVAL");
	CHECK(post_send(&c, c.mr->lkey, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, 0) == EINVAL,
	      "an atomic: EINVAL, bad_wr set");
	CHECK(post_send(&c, c.mr->lkey, 1, IBV_WR_SEND, IBV_SEND_INLINE) == EINVAL,
	      "inline data: EINVAL, bad_wr set");
	CHECK(post_send(&c, c.mr->lkey, 1, IBV_WR_RDMA_WRITE_WITH_IMM, 0) == EINVAL,
	      "immediate data: EINVAL, bad_wr set");
	CHECK(rdma_join_multicast(c.id, (struct sockaddr *)&server_addr, NULL) == -1 && errno == ENOSYS,
	      "multicast: -1, ENOSYS");

	/* The connection still works after the refusals. */
	strcpy(c.buf, "hello");
	CHECK(post_send(&c, c.mr->lkey, 2, IBV_WR_SEND, 0) == 0, "a Send posts");
	wc = wait_wc(&c);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && wc.opcode == IBV_WC_SEND &&
		      wc.qp_num == c.id->qp->qp_num,
	      "the Send completes, with its queue pair's number");
	wc = wait_wc(&s);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 && wc.opcode == IBV_WC_RECV && wc.byte_len == 64 &&
		      strcmp(s.buf, "hello") == 0,
	      "the receive posted before accept takes it");

	/* A bad lkey: posted, then a local protection error; the queue pair is in error. */
	CHECK(post_send(&c, c.mr->lkey ^ 0x00abcd00, 3, IBV_WR_SEND, 0) == 0, "a bad lkey posts");
	wc = wait_wc(&c);
	CHECK(wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 3, "it completes with IBV_WC_LOC_PROT_ERR");
	CHECK(ibv_query_qp(c.id->qp, &qattr, IBV_QP_STATE, &qinit) == 0 && qattr.qp_state == IBV_QPS_ERR,
	      "the queue pair is in ERR");
	CHECK(post_send(&c, c.mr->lkey, 4, IBV_WR_SEND, 0) == 0, "a post on the errored queue pair");
	wc = wait_wc(&c);
	CHECK(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 4, "completes with IBV_WC_WR_FLUSH_ERR");
	CHECK(post_recv(&c, c.mr, 5) == 0, "a receive on it");
	wc = wait_wc(&c);
	CHECK(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 5, "completes flushed too");
	/* The peer sees the connection end: its last receive flushed, DISCONNECTED on both. */
	wc = wait_wc(&s);
	CHECK(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 101, "the peer's receive completes flushed");
	rdma_ack_cm_event(next_event(s.ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_disconnect(c.id);
	rdma_ack_cm_event(next_event(c.ch, RDMA_CM_EVENT_DISCONNECTED));

	/* A region deregistered while a receive is posted on it: that receive completes
	 * flushed and the memory is not touched; another connection is unharmed. The client's
	 * queue pair takes inline data. */
	inline_size = 64;
	connect_pair(&c2, &s2, 0);
	doomed_buf = calloc(1, 4096);
	doomed = ibv_reg_mr(s2.pd, doomed_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(doomed != NULL, "a second region");
	CHECK(post_recv(&s2, doomed, 200) == 0, "a receive on it");
	CHECK(ibv_dereg_mr(doomed) == 0, "deregistered while the receive is posted");
	strcpy(c2.buf, "into freed memory?");
	CHECK(post_send(&c2, c2.mr->lkey, 6, IBV_WR_SEND, 0) == 0, "the peer Sends");
	wc = wait_wc(&c2);
	CHECK(wc.wr_id == 6, "its Send completes");
	wc = wait_wc(&s2);
	CHECK(wc.wr_id == 200 && wc.status == IBV_WC_WR_FLUSH_ERR, "the receive completes flushed");
	CHECK(doomed_buf[0] == 0, "nothing was written into the deregistered memory");
	{
		/* Inline data: from unregistered memory, no lkey, copied at post time. */
		char words[] = "inline, from the stack";
		struct ibv_sge sge = {.addr = (uintptr_t)words, .length = sizeof(words), .lkey = 0};
		struct ibv_send_wr wr = {0}, *bad = NULL;
		wr.wr_id = 7;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		CHECK(post_recv(&s2, s2.mr, 201) == 0, "a receive on a live region");
		CHECK(ibv_post_send(c2.id->qp, &wr, &bad) == 0, "an inline Send posts");
		memset(words, 'x', sizeof(words) - 1);
		wc = wait_wc(&c2);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "it completes");
		wc = wait_wc(&s2);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 201 &&
			      strcmp(s2.buf, "inline, from the stack") == 0,
		      "the data copied at post time arrives");
		sge.length = 65;
		CHECK(ibv_post_send(c2.id->qp, &wr, &bad) == EINVAL, "more than max_inline_data: EINVAL");
	}
	rdma_disconnect(c2.id);
	return 0;
}

static int cm_events(void)
{
	struct end c = {0}, s = {0}, r = {0}, late = {0};
	struct rdma_cm_id *listen_id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param param = {0}, reply = {0};
	const char request_pd[] = "forty octets of the initiator's own data";
	const char reply_pd[] = "thirty octets from the server";
	const char reject_pd[] = "go away";

	s.ch = rdma_create_event_channel();
	CHECK(rdma_create_id(s.ch, &listen_id, NULL, RDMA_PS_TCP) == 0 &&
		      rdma_bind_addr(listen_id, (struct sockaddr *)&server_addr) == 0 &&
		      rdma_listen(listen_id, 4) == 0,
	      "listening");
	CHECK(ntohs(rdma_get_src_port(listen_id)) == ntohs(server_addr.sin_port), "rdma_get_src_port");
	{
		/* Port 0: a port is chosen at bind, before the listen (qperf reads it then). */
		struct rdma_cm_id *any_id;
		struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = 0};
		uint16_t port;
		CHECK(rdma_create_id(s.ch, &any_id, NULL, RDMA_PS_TCP) == 0 &&
			      rdma_bind_addr(any_id, (struct sockaddr *)&any) == 0,
		      "binding the wildcard, port 0");
		port = ntohs(rdma_get_src_port(any_id));
		CHECK(port != 0, "rdma_get_src_port gives the chosen port before listening");
		CHECK(rdma_listen(any_id, 1) == 0 && ntohs(rdma_get_src_port(any_id)) == port,
		      "and listens on it");
		rdma_destroy_id(any_id);
	}

	/* Private data raw both ways; IRD and ORD offered in the Request. */
	client(&c);
	param.private_data = request_pd;
	param.private_data_len = sizeof(request_pd) - 1;
	param.responder_resources = 5;
	param.initiator_depth = 3;
	param.retry_count = 7;
	CHECK(rdma_connect(c.id, &param) == 0, "rdma_connect with 40 octets of private data");
	ev = next_event(s.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev->listen_id == listen_id && ev->id != listen_id, "CONNECT_REQUEST names the listener and a new id");
	CHECK(ev->param.conn.private_data_len == sizeof(request_pd) - 1 &&
		      memcmp(ev->param.conn.private_data, request_pd, sizeof(request_pd) - 1) == 0,
	      "the Request's private data arrives raw");
	CHECK(ev->param.conn.initiator_depth == 5 && ev->param.conn.responder_resources == 3,
	      "the Request's IRD (initiator_depth) and ORD (responder_resources)");
	s.id = ev->id;
	rdma_ack_cm_event(ev);
	resources(&s, s.id->verbs);
	reply.private_data = reply_pd;
	reply.private_data_len = sizeof(reply_pd) - 1;
	reply.responder_resources = 3;
	reply.initiator_depth = 5;
	CHECK(rdma_accept(s.id, &reply) == 0, "rdma_accept with 30 octets of private data");
	rdma_ack_cm_event(next_event(s.ch, RDMA_CM_EVENT_ESTABLISHED));
	ev = next_event(c.ch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(ev->param.conn.private_data_len == sizeof(reply_pd) - 1 &&
		      memcmp(ev->param.conn.private_data, reply_pd, sizeof(reply_pd) - 1) == 0,
	      "ESTABLISHED carries the Reply's private data raw");
	rdma_ack_cm_event(ev);

	/* A rejection, with its private data. */
	client(&r);
	param.retry_count = 0;
	CHECK(rdma_connect(r.id, &param) == 0, "a second rdma_connect");
	ev = next_event(s.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(rdma_reject(ev->id, reject_pd, sizeof(reject_pd) - 1) == 0, "rdma_reject with private data");
	rdma_destroy_id(ev->id);
	rdma_ack_cm_event(ev);
	ev = next_event(r.ch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev->status < 0 && ev->param.conn.private_data_len == sizeof(reject_pd) - 1 &&
		      memcmp(ev->param.conn.private_data, reject_pd, sizeof(reject_pd) - 1) == 0,
	      "REJECTED, a negative status and the Reject's private data");
	rdma_ack_cm_event(ev);

	/* No listener: REJECTED (ECONNREFUSED). */
	rdma_destroy_id(listen_id);
	client(&late);
	CHECK(rdma_connect(late.id, &param) == 0, "rdma_connect to a port nobody listens on");
	ev = next_event(late.ch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev->status == -ECONNREFUSED, "REJECTED with -ECONNREFUSED");
	rdma_ack_cm_event(ev);

	/* The established connection still works; a disconnect reaches both sides. */
	CHECK(post_recv(&s, s.mr, 1) == 0, "a receive");
	strcpy(c.buf, "still here");
	CHECK(post_send(&c, c.mr->lkey, 2, IBV_WR_SEND, 0) == 0, "a Send");
	CHECK(wait_wc(&s).status == IBV_WC_SUCCESS && strcmp(s.buf, "still here") == 0, "arrives");
	CHECK(rdma_disconnect(s.id) == 0, "the server disconnects");
	rdma_ack_cm_event(next_event(s.ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_ack_cm_event(next_event(c.ch, RDMA_CM_EVENT_DISCONNECTED));
	printf("ok   DISCONNECTED on both sides\n");
	rdma_destroy_qp(c.id);
	CHECK(c.id->qp == NULL, "rdma_destroy_qp");
	CHECK(rdma_destroy_id(c.id) == 0, "rdma_destroy_id");
	return 0;
}

int main(int argc, char **argv)
{
	int rc;
	if (argc != 3)
		return 2;
	server_addr.sin_family = AF_INET;
	server_addr.sin_port = htons(atoi(argv[2]));
	inet_pton(AF_INET, "127.0.0.1", &server_addr.sin_addr);
	if (strcmp(argv[1], "misuse") == 0)
		rc = misuse();
	else if (strcmp(argv[1], "cm") == 0)
		rc = cm_events();
	else
		return 2;
	if (rc == 0)
		printf("all checks passed\n");
	return rc;
}
