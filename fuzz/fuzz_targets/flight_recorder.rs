//! cargo fuzz target: analysis::robustness::flight_recorder (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::flight_recorder(data);
});
