#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let t = fuzz_targets::target("endpoint_pair").expect("target");
    (t.run)(data);
});
