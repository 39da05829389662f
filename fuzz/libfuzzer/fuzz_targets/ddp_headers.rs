#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let t = fuzz_targets::target("ddp_headers").expect("target");
    (t.run)(data);
});
