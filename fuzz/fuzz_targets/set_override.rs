//! cargo fuzz target: analysis::robustness::set_override (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::set_override(data);
});
