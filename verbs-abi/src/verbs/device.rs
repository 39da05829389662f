//! The devices: one iWARP device per configured interface (transport iWARP, node type RNIC,
//! link layer Ethernet, one active port, its GID the interface's address), listed by
//! `ibv_get_device_list`. Each device's xwarp engine (`dataplane::Device`) is opened on first
//! use and serves every context of the process.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::{Mutex, OnceLock};

use crate::abi::verbs::*;
use crate::settings::{Interface, Settings, Transport};
use crate::{errno, log};

/// xwarp's vendor id ("xwp"): no vendor perftest recognises, so it treats the device as a
/// plain verbs device (no inline data, no vendor extensions).
pub(crate) const VENDOR_ID: u32 = 0x0078_7770;
/// Most RDMA Reads in flight per queue pair, each way (IRD and ORD).
pub(crate) const MAX_RD_ATOM: c_int = 32;
/// Most work requests per queue.
pub(crate) const MAX_QP_WR: c_int = 16384;
/// Most scatter-gather elements per work request.
pub(crate) const MAX_SGE: c_int = dataplane::MAX_SGE as c_int;
/// Most completions per completion queue.
pub(crate) const MAX_CQE: c_int = 1 << 20;
/// The largest message.
pub(crate) const MAX_MSG: u32 = u32::MAX;

/// A device: its C structure, its interface and its engine.
pub(crate) struct XwDevice {
    c: Box<IbvDevice>,
    pub(crate) iface: Interface,
    pub(crate) transport: Transport,
    /// The engine, opened on first use and kept for the process's life.
    engine: Mutex<Option<dataplane::Device>>,
}

// Safety: the C structure is written once, before the device is shared, and only read after;
// the rest is Sync.
unsafe impl Sync for XwDevice {}
// Safety: as above.
unsafe impl Send for XwDevice {}

/// The process's devices.
pub(crate) struct Registry {
    pub(crate) devices: Vec<XwDevice>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// The devices (made from the environment on first use).
pub(crate) fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| {
        let s = Settings::from_env();
        if let Some(p) = &s.problem {
            log::always(p);
        }
        Registry {
            devices: s
                .interfaces
                .into_iter()
                .map(|i| XwDevice::new(i, s.transport))
                .collect(),
        }
    })
}

fn fill(dst: &mut [c_char], s: &str) {
    let room = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

impl XwDevice {
    fn new(iface: Interface, transport: Transport) -> Self {
        let mut c = Box::new(IbvDevice {
            ops: IbvDeviceOps { dummy: [0; 2] },
            node_type: IBV_NODE_RNIC,
            transport_type: IBV_TRANSPORT_IWARP,
            name: [0; 64],
            dev_name: [0; 64],
            dev_path: [0; 256],
            ibdev_path: [0; 256],
        });
        let name = format!("xwarp_{}", iface.name);
        fill(&mut c.name, &name);
        fill(&mut c.dev_name, &format!("uverbs_{name}"));
        fill(&mut c.dev_path, &format!("/sys/class/net/{}", iface.name));
        fill(&mut c.ibdev_path, &format!("/sys/class/net/{}", iface.name));
        XwDevice {
            c,
            iface,
            transport,
            engine: Mutex::new(None),
        }
    }

    /// The pointer C sees.
    pub(crate) fn c_ptr(&self) -> *mut IbvDevice {
        &*self.c as *const IbvDevice as *mut IbvDevice
    }

    /// Its name ("xwarp_eth0").
    pub(crate) fn name(&self) -> String {
        // Safety: `name` is NUL-terminated (fill leaves the last octet 0).
        unsafe { CStr::from_ptr(self.c.name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// The device behind a pointer from `ibv_get_device_list`.
    pub(crate) fn from_c(p: *mut IbvDevice) -> Option<&'static XwDevice> {
        registry().devices.iter().find(|d| d.c_ptr() == p)
    }

    /// The engine, opened now if it is not yet: the kernel transport with a driver thread
    /// per connection, or the AF_XDP engine on the interface with its own thread (programs
    /// may spin on memory without calling the library), assisted by the application's posts
    /// and polls unless `XWARP_VERBS_ASSIST=0` (the thread stands down while the program waits
    /// in a poll loop and the engine has little to do).
    pub(crate) fn engine(&self) -> Result<dataplane::Device, String> {
        let mut g = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = &*g {
            return Ok(d.clone());
        }
        let d = match self.transport {
            Transport::Kernel => dataplane::Device::open_kernel(dataplane::EngineMode::Threaded),
            Transport::Xdp => {
                let mut cfg = dataplane::XdpConfig::new(&self.iface.name);
                cfg.mode = dataplane::EngineMode::Threaded;
                // Programs that poll completions in a loop drive it themselves meanwhile.
                cfg.assist = crate::settings::assist();
                cfg.address = self.iface.address();
                dataplane::Device::open_xdp(cfg)
            }
        }
        .map_err(|e| {
            format!(
                "{}: opening the {:?} transport failed: {e}",
                self.name(),
                self.transport
            )
        })?;
        static AT_EXIT: OnceLock<()> = OnceLock::new();
        AT_EXIT.get_or_init(|| {
            // Safety: registers a function with no preconditions, run once at exit.
            unsafe { libc::atexit(at_exit) };
        });
        *g = Some(d.clone());
        Ok(d)
    }

    /// `ibv_query_device`'s answer.
    pub(crate) fn attr(&self) -> IbvDeviceAttr {
        let mut fw = [0 as c_char; 64];
        fill(&mut fw, concat!("xwarp ", env!("CARGO_PKG_VERSION")));
        IbvDeviceAttr {
            fw_ver: fw,
            node_guid: self.iface.guid().to_be(),
            sys_image_guid: self.iface.guid().to_be(),
            max_mr_size: 1 << 40,
            page_size_cap: 0xffff_f000,
            vendor_id: VENDOR_ID,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: 1 << 16,
            max_qp_wr: MAX_QP_WR,
            device_cap_flags: 0,
            max_sge: MAX_SGE,
            max_sge_rd: MAX_SGE,
            max_cq: 1 << 16,
            max_cqe: MAX_CQE,
            max_mr: 1 << 20,
            max_pd: 1 << 16,
            max_qp_rd_atom: MAX_RD_ATOM,
            max_ee_rd_atom: 0,
            max_res_rd_atom: MAX_RD_ATOM * (1 << 16),
            max_qp_init_rd_atom: MAX_RD_ATOM,
            max_ee_init_rd_atom: 0,
            atomic_cap: 0,
            max_ee: 0,
            max_rdd: 0,
            max_mw: 0,
            max_raw_ipv6_qp: 0,
            max_raw_ethy_qp: 0,
            max_mcast_grp: 0,
            max_mcast_qp_attach: 0,
            max_total_mcast_qp_attach: 0,
            max_ah: 0,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: 0,
            max_srq_wr: 0,
            max_srq_sge: 0,
            max_pkeys: 1,
            local_ca_ack_delay: 0,
            phys_port_cnt: 1,
        }
    }

    /// `ibv_query_port`'s answer for port 1.
    pub(crate) fn port_attr(&self) -> IbvPortAttr {
        let mtu = match self.iface.mtu {
            m if m >= 4096 + 40 => IBV_MTU_4096,
            m if m >= 2048 + 40 => 4,
            m if m >= 1024 + 40 => IBV_MTU_1024,
            m if m >= 512 + 40 => 2,
            _ => 1,
        };
        IbvPortAttr {
            state: IBV_PORT_ACTIVE,
            max_mtu: mtu,
            active_mtu: mtu,
            gid_tbl_len: 1,
            port_cap_flags: 0,
            max_msg_sz: MAX_MSG,
            bad_pkey_cntr: 0,
            qkey_viol_cntr: 0,
            pkey_tbl_len: 1,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            max_vl_num: 1,
            sm_sl: 0,
            subnet_timeout: 0,
            init_type_reply: 0,
            // 4x at 10 Gb/s (QDR): an Ethernet link of 40 Gb/s.
            active_width: 2,
            active_speed: 4,
            // LinkUp.
            phys_state: 5,
            link_layer: IBV_LINK_LAYER_ETHERNET,
            flags: 0,
            port_cap_flags2: 0,
            active_speed_ex: 0,
        }
    }

    /// The GID at `index` (only index 0 exists).
    pub(crate) fn gid(&self, index: c_int) -> Option<IbvGid> {
        (index == 0).then(|| IbvGid {
            raw: self.iface.gid(),
        })
    }
}

/// How long the process's exit waits for its closed connections to finish.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// At the process's exit: closes the connections still open and lets each device's engine
/// finish them (an AF_XDP engine ends with the process: without this the peers would see
/// neither the last acknowledgements nor a FIN).
extern "C" fn at_exit() {
    super::qp::close_all();
    for d in &registry().devices {
        let engine = match d.engine.try_lock() {
            Ok(g) => g.clone(),
            Err(_) => None,
        };
        if let Some(e) = engine {
            e.finish_closing(EXIT_GRACE);
        }
    }
}

/// `ibv_get_device_list`: a NULL-terminated array of every device, for `ibv_free_device_list`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut IbvDevice {
    let devs = &registry().devices;
    let n = devs.len();
    // Safety: calloc of n+1 pointers (NULL-terminated); freed by ibv_free_device_list.
    let list = unsafe { libc::calloc(n + 1, std::mem::size_of::<*mut IbvDevice>()) }
        .cast::<*mut IbvDevice>();
    if list.is_null() {
        return errno::null(libc::ENOMEM);
    }
    for (i, d) in devs.iter().enumerate() {
        // Safety: i < n + 1 elements allocated above.
        unsafe { *list.add(i) = d.c_ptr() };
    }
    if !num.is_null() {
        // Safety: the caller's pointer to an int (NULL allowed and checked).
        unsafe { *num = n as c_int };
    }
    list
}

/// `ibv_free_device_list`.
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut IbvDevice) {
    // Safety: the array ibv_get_device_list allocated with calloc (or NULL).
    unsafe { libc::free(list.cast()) };
}

/// `ibv_get_device_name`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut IbvDevice) -> *const c_char {
    match XwDevice::from_c(device) {
        Some(d) => d.c.name.as_ptr(),
        None => errno::null(libc::EINVAL),
    }
}

/// `ibv_get_device_guid` (network order).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut IbvDevice) -> u64 {
    XwDevice::from_c(device).map_or(0, |d| d.iface.guid().to_be())
}

/// `ibv_get_device_index`: its place in the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut IbvDevice) -> c_int {
    registry()
        .devices
        .iter()
        .position(|d| d.c_ptr() == device)
        .map_or(-1, |i| i as c_int)
}
