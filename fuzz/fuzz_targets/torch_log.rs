//! cargo fuzz target: analysis::robustness::torch_log (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::torch_log(data);
});
