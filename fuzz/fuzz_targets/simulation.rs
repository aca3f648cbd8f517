//! cargo fuzz target: analysis::robustness::simulation (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::simulation(data);
});
