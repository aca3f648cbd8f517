//! cargo fuzz target: hw::robustness::launch_options (docs/reliability.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hw::robustness::launch_options(data);
});
