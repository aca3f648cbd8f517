//! cargo fuzz target: analysis::robustness::simulation (docs/reliability.md), with the simulator.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    analysis::robustness::simulation(data, &|scenario, fold, summary| {
        let options = sim::engine::Options {
            fold,
            summary,
            ..sim::engine::Options::default()
        };
        sim::engine::simulate_with(scenario, options).0
    });
});
