//! cargo fuzz target: analysis::robustness::calibration (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::calibration(data);
});
