//! cargo fuzz target: analysis::robustness::sweep_csv (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::sweep_csv(data);
});
