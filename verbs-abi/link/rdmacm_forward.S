/* librdmacm.so.1: every function jumps into libibverbs.so.1, which holds the process's one
   engine. `forward` jumps to xwarp_<name> with the caller's arguments untouched; `unsupported`
   jumps to xwarp_unsupported(name), which logs once, sets errno and returns -1. x86_64. */

	.macro forward name
	.text
	.globl \name
	.type \name, @function
\name:
	jmp xwarp_\name@PLT
	.size \name, .-\name
	.endm

	.macro unsupported name
	.section .rodata
.Lname_\name:
	.asciz "\name"
	.text
	.globl \name
	.type \name, @function
\name:
	lea .Lname_\name(%rip), %rdi
	jmp xwarp_unsupported@PLT
	.size \name, .-\name
	.endm

	forward rdma_create_event_channel
	forward rdma_destroy_event_channel
	forward rdma_create_id
	forward rdma_destroy_id
	forward rdma_bind_addr
	forward rdma_resolve_addr
	forward rdma_resolve_route
	forward rdma_create_qp
	forward rdma_create_qp_ex
	forward rdma_destroy_qp
	forward rdma_connect
	forward rdma_listen
	forward rdma_accept
	forward rdma_reject
	forward rdma_disconnect
	forward rdma_get_cm_event
	forward rdma_ack_cm_event
	forward rdma_get_src_port
	forward rdma_get_dst_port
	forward rdma_get_devices
	forward rdma_free_devices
	forward rdma_event_str
	forward rdma_set_option
	forward rdma_get_local_addr
	forward rdma_get_peer_addr
	forward rdma_getaddrinfo
	forward rdma_freeaddrinfo
	forward rdma_establish
	forward rdma_init_qp_attr
	forward rdma_notify

	unsupported rdma_join_multicast
	unsupported rdma_join_multicast_ex
	unsupported rdma_leave_multicast
	unsupported rdma_migrate_id
	unsupported rdma_get_request
	unsupported rdma_create_ep
	unsupported rdma_destroy_ep
	unsupported rdma_create_srq
	unsupported rdma_create_srq_ex
	unsupported rdma_destroy_srq
	unsupported rdma_get_remote_ece
	unsupported rdma_reject_ece
	unsupported rdma_set_local_ece
	unsupported rsocket
	unsupported rbind
	unsupported rlisten
	unsupported raccept
	unsupported rconnect
	unsupported rshutdown
	unsupported rclose
	unsupported rrecv
	unsupported rrecvfrom
	unsupported rrecvmsg
	unsupported rsend
	unsupported rsendto
	unsupported rsendmsg
	unsupported rread
	unsupported rreadv
	unsupported rwrite
	unsupported rwritev
	unsupported rpoll
	unsupported rselect
	unsupported rgetpeername
	unsupported rgetsockname
	unsupported rsetsockopt
	unsupported rgetsockopt
	unsupported rfcntl
	unsupported riomap
	unsupported riounmap
	unsupported riowrite

	.section .note.GNU-stack,"",@progbits
