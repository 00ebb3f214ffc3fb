//! Generates the DPDK bindings, only when the `dpdk` feature is on.
//!
//! * DPDK is found with pkg-config (`libdpdk`), so the headers and libraries match whatever
//!   the distribution installed (Debian 12: DPDK 22.11).
//! * The allowlist is mandatory: DPDK's headers declare thousands of items, many of them
//!   packed or bit-field structs bindgen lays out wrongly or that pull in half of libc; the
//!   safe wrapper needs a few dozen.
//! * The burst and mbuf allocation functions are `static inline` in DPDK's headers, so there
//!   is no symbol to link against: bindgen's `wrap_static_fns` writes a C file of
//!   non-inline wrappers, compiled here with `cc`.
//! * `shim.c` covers what bindgen cannot bind at all: `rte_errno` (a thread-local behind a
//!   macro) and string macros.
//! * DPDK's headers use SSE4.2 intrinsics and were built for `-march=corei7` (Debian's
//!   pkg-config says so); clang and cc both need the same flag or the inline functions do
//!   not compile.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    bind::generate();
}

#[cfg(feature = "dpdk")]
mod bind {
    use std::env;
    use std::path::PathBuf;

    /// The CPU baseline DPDK's inline functions need (Debian's `pkg-config --cflags libdpdk`).
    const MARCH: &str = "-march=corei7";

    /// Functions the wrapper calls. Static inline ones get C wrappers (see `wrap_static_fns`).
    const FUNCTIONS: &[&str] = &[
        // EAL
        "rte_eal_init",
        "rte_eal_cleanup",
        "rte_strerror",
        "rte_socket_id",
        "rte_lcore_id",
        "rte_thread_register",
        "rte_thread_unregister",
        "rte_dev_probe",
        "rte_dev_remove",
        // mempools and mbufs
        "rte_pktmbuf_pool_create",
        "rte_pktmbuf_pool_create_by_ops",
        "rte_mbuf_best_mempool_ops",
        "rte_mempool_free",
        "rte_mempool_avail_count",
        "rte_mempool_in_use_count",
        "rte_pktmbuf_alloc",
        "rte_pktmbuf_free",
        "rte_pktmbuf_free_bulk",
        // ethdev
        "rte_eth_dev_get_port_by_name",
        "rte_eth_dev_get_name_by_port",
        "rte_eth_dev_is_valid_port",
        "rte_eth_dev_count_avail",
        "rte_eth_dev_socket_id",
        "rte_eth_dev_info_get",
        "rte_eth_dev_configure",
        "rte_eth_dev_adjust_nb_rx_tx_desc",
        "rte_eth_rx_queue_setup",
        "rte_eth_tx_queue_setup",
        "rte_eth_dev_start",
        "rte_eth_dev_stop",
        "rte_eth_dev_close",
        "rte_eth_dev_set_mtu",
        "rte_eth_link_get_nowait",
        "rte_eth_stats_get",
        "rte_eth_stats_reset",
        "rte_eth_promiscuous_enable",
        "rte_eth_macaddr_get",
        "rte_eth_rx_burst",
        "rte_eth_tx_burst",
        // shim.c
        "rocesw_rte_errno",
        "rocesw_rte_pmd_path",
    ];

    /// Types the wrapper reads or fills in (their fields' types come along).
    const TYPES: &[&str] = &[
        "rte_mbuf",
        "rte_mempool",
        "rte_eth_conf",
        "rte_eth_dev_info",
        "rte_eth_link",
        "rte_eth_stats",
        "rte_ether_addr",
    ];

    /// Constants the wrapper uses.
    const VARS: &[&str] = &[
        "SOCKET_ID_ANY",
        "RTE_MAX_ETHPORTS",
        "RTE_ETH_NAME_MAX_LEN",
        "RTE_PKTMBUF_HEADROOM",
        "RTE_MBUF_DEFAULT_DATAROOM",
        "RTE_MEMPOOL_CACHE_MAX_SIZE",
        "LCORE_ID_ANY",
        "RTE_ETH_LINK_UP",
        "RTE_ETH_LINK_FULL_DUPLEX",
        "RTE_ETH_SPEED_NUM_NONE",
        "RTE_ETH_SPEED_NUM_UNKNOWN",
    ];

    /// Stops the build with a message that says what to install (no panic backtrace).
    fn fail(msg: &str) -> ! {
        eprintln!(
            "\n{msg}\n\nOn Debian: apt-get install libdpdk-dev dpdk libclang-dev pkg-config\n\
             (or build without the `dpdk` feature).\n"
        );
        std::process::exit(1);
    }

    pub fn generate() {
        let lib = pkg_config::Config::new()
            // Link lines are printed after the shim's, below: the shim is a static library
            // that calls into DPDK's shared ones, so it must come first on the link line.
            .cargo_metadata(false)
            .probe("libdpdk")
            .unwrap_or_else(|e| {
                fail(&format!(
                    "the `dpdk` feature needs DPDK's development files, found with \
                     pkg-config (libdpdk): {e}"
                ))
            });

        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
        let out = PathBuf::from(env::var("OUT_DIR").unwrap());
        for f in ["wrapper.h", "shim.h", "shim.c"] {
            println!("cargo:rerun-if-changed={f}");
        }

        let mut clang_args: Vec<String> = vec![MARCH.into()];
        clang_args.push(format!("-I{}", manifest.display()));
        for p in &lib.include_paths {
            clang_args.push(format!("-I{}", p.display()));
        }
        for (k, v) in &lib.defines {
            clang_args.push(match v {
                Some(v) => format!("-D{k}={v}"),
                None => format!("-D{k}"),
            });
        }

        let wrappers = out.join("static_fns");
        let mut builder = bindgen::Builder::default()
            .header(manifest.join("wrapper.h").to_string_lossy())
            .clang_args(&clang_args)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .allowlist_recursively(true)
            .wrap_static_fns(true)
            .wrap_static_fns_path(&wrappers)
            // C enums as plain integer constants: a driver may return values the header
            // did not list, which a Rust enum could not hold.
            .default_enum_style(bindgen::EnumVariation::Consts)
            .derive_default(true)
            .derive_debug(false)
            // Compile-time checks of every struct's size and field offsets against what
            // clang computed from DPDK's headers (the wrapper reads mbuf fields directly).
            .layout_tests(true)
            .generate_comments(true)
            // Opaque: the wrapper only passes pointers to these, and their contents
            // (atomics, rings, per-lcore caches) are DPDK's business.
            .opaque_type("rte_mempool")
            .opaque_type("rte_mbuf_ext_shared_info")
            .opaque_type("rte_device")
            .opaque_type("rte_eth_dev_portconf")
            .opaque_type("rte_eth_switch_info")
            .opaque_type("rte_eth_dev_data")
            .opaque_type("rte_eth_fp_ops");
        for f in FUNCTIONS {
            builder = builder.allowlist_function(f);
        }
        for t in TYPES {
            builder = builder.allowlist_type(t);
        }
        for v in VARS {
            builder = builder.allowlist_var(v);
        }
        let bindings = builder.generate().unwrap_or_else(|e| {
            fail(&format!(
                "bindgen could not read DPDK's headers: {e}\n\
                 It needs libclang (libclang-dev) as well as DPDK's headers."
            ))
        });
        bindings
            .write_to_file(out.join("bindings.rs"))
            .expect("write bindings.rs");

        // The generated wrappers of the static inline functions (static_fns.c includes
        // wrapper.h, rte_config.h first), and the shim.
        let mut cc = cc::Build::new();
        cc.file(wrappers.with_extension("c"))
            .file(manifest.join("shim.c"))
            .include(&manifest)
            .flag(MARCH)
            // DPDK's headers trip a few of cc's default warnings; they are not ours to fix.
            .warnings(false);
        for p in &lib.include_paths {
            cc.include(p);
        }
        for (k, v) in &lib.defines {
            cc.define(k, v.as_deref());
        }
        cc.compile("rocesw_dpdk_shim");

        for p in &lib.link_paths {
            println!("cargo:rustc-link-search=native={}", p.display());
        }
        for l in &lib.libs {
            println!("cargo:rustc-link-lib={l}");
        }
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    }
}
