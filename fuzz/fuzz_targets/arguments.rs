//! cargo fuzz target: analysis::robustness::arguments (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::arguments(data);
});
