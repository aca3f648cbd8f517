//! cargo fuzz target: hw::robustness::merge_parts (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hw::robustness::merge_parts(data);
});
