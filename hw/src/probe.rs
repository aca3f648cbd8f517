//! What the machine offers: libraries, GPUs, driver, CUDA and NCCL versions. Every library is
//! checked with cudarc's `is_culib_present` before any other cudarc call, because cudarc
//! panics on first use of a library the loader cannot find.

use crate::error::HwError;
use cudarc::driver::{result, sys::CUdevice_attribute};
use std::collections::BTreeMap;

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// (major, minor), e.g. (9, 0) for Hopper.
    pub compute_capability: (i32, i32),
    pub sms: u32,
    pub memory_bytes: u64,
}

/// The result of [`crate::probe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceReport {
    pub devices: Vec<DeviceInfo>,
    /// The kernel driver's release (`/proc/driver/nvidia/version`), e.g. `580.159.04`.
    pub driver: Option<String>,
    /// The CUDA version the driver supports (`cuDriverGetVersion`), e.g. `13.0`.
    pub driver_cuda: String,
    /// The CUDA version the bindings were generated for.
    pub bindings_cuda: &'static str,
    /// `ncclGetVersion`, e.g. `2.28.9`.
    pub nccl: String,
}

impl DeviceReport {
    /// The Timeline's `machine` map for a run on `ordinal` (no host name).
    pub fn machine(&self, ordinal: usize) -> BTreeMap<String, String> {
        let mut machine = BTreeMap::new();
        if let Some(device) = self.devices.get(ordinal) {
            machine.insert("device".into(), device.name.clone());
            let (major, minor) = device.compute_capability;
            machine.insert("compute_capability".into(), format!("{major}.{minor}"));
            machine.insert("sms".into(), device.sms.to_string());
            machine.insert(
                "memory_gib".into(),
                format!("{:.1}", device.memory_bytes as f64 / (1u64 << 30) as f64),
            );
        }
        machine.insert("gpus".into(), self.devices.len().to_string());
        if let Some(driver) = &self.driver {
            machine.insert("driver".into(), driver.clone());
        }
        machine.insert("cuda".into(), self.driver_cuda.clone());
        machine.insert("cuda_bindings".into(), self.bindings_cuda.to_string());
        machine.insert("nccl".into(), self.nccl.clone());
        machine
    }
}

/// The libraries cudarc loads, with what each is for.
const LIBRARIES: [(&str, &str); 4] = [
    (
        "libcuda.so",
        "the CUDA driver API (is an NVIDIA driver installed?)",
    ),
    ("libnvrtc.so", "compiling the spin kernel"),
    ("libcublas.so", "gemm ops"),
    ("libnccl.so", "collectives"),
];

/// Fails with the first library the dynamic loader cannot find.
pub fn check_libraries() -> Result<(), HwError> {
    // SAFETY: each call only tries to dlopen the library's candidate names.
    let present = unsafe {
        [
            cudarc::driver::sys::is_culib_present(),
            cudarc::nvrtc::sys::is_culib_present(),
            cudarc::cublas::sys::is_culib_present(),
            cudarc::nccl::sys::is_culib_present(),
        ]
    };
    for ((library, needed_for), present) in LIBRARIES.into_iter().zip(present) {
        if !present {
            return Err(HwError::MissingLibrary {
                library,
                needed_for,
            });
        }
    }
    check_symbols()
}

/// Functions each library must export, checked before cudarc resolves them (it panics on a
/// missing symbol): those of the probe and of each library's first use.
const SYMBOLS: [(&str, &[&str]); 4] = [
    (
        "libcuda.so",
        &[
            "cuInit",
            "cuDeviceGetCount",
            "cuDeviceGet",
            "cuDeviceGetAttribute",
            "cuDeviceGetName",
            "cuDeviceTotalMem_v2",
            "cuDriverGetVersion",
            "cuStreamQuery",
        ],
    ),
    (
        "libnvrtc.so",
        &["nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetPTX"],
    ),
    (
        "libcublas.so",
        &["cublasCreate_v2", "cublasSetWorkspace_v2"],
    ),
    (
        "libnccl.so",
        &["ncclGetUniqueId", "ncclCommInitRank", "ncclGetErrorString"],
    ),
];

/// Fails with the first function of [`SYMBOLS`] its library does not export.
fn check_symbols() -> Result<(), HwError> {
    // SAFETY: the libraries are present (checked above), so `culib` loads rather than panics;
    // a symbol is only looked up, never called.
    let libraries = unsafe {
        [
            cudarc::driver::sys::culib(),
            cudarc::nvrtc::sys::culib(),
            cudarc::cublas::sys::culib(),
            cudarc::nccl::sys::culib(),
        ]
    };
    for ((library, symbols), loaded) in SYMBOLS.into_iter().zip(libraries) {
        for &symbol in symbols {
            // SAFETY: the pointer is only tested for presence.
            let found = unsafe { loaded.get::<*const ()>(symbol.as_bytes()) }.is_ok();
            if !found {
                return Err(HwError::MissingSymbol { library, symbol });
            }
        }
    }
    Ok(())
}

/// `13000` → `13.0`.
pub fn cuda_version_string(code: i32) -> String {
    format!("{}.{}", code / 1000, code % 1000 / 10)
}

/// The release from `/proc/driver/nvidia/version`'s first line ("NVRM version: NVIDIA UNIX Open
/// Kernel Module for x86_64  580.159.04  Release Build …"): its first dotted number.
pub fn driver_release(proc_text: &str) -> Option<String> {
    let line = proc_text.lines().next()?;
    line.split_whitespace()
        .find(|word| {
            word.contains('.')
                && word
                    .split('.')
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// `cuDeviceGetCount`'s answer as a count: none (or a negative one) is no usable GPU.
fn device_count(reported: i32) -> Result<usize, HwError> {
    match usize::try_from(reported) {
        Ok(count) if count > 0 => Ok(count),
        _ => Err(HwError::NoDevice(format!(
            "the driver reports {reported} CUDA devices"
        ))),
    }
}

pub fn probe() -> Result<DeviceReport, HwError> {
    check_libraries()?;
    result::init().map_err(|error| HwError::NoDevice(format!("cuInit failed: {error:?}")))?;
    let count = result::device::get_count()
        .map_err(|error| HwError::NoDevice(format!("cuDeviceGetCount failed: {error:?}")))?;
    let mut devices = Vec::with_capacity(device_count(count)?);
    for ordinal in 0..count {
        let query = |error| HwError::cuda("cuDeviceGet*", error);
        let device = result::device::get(ordinal).map_err(query)?;
        // SAFETY: a valid device handle and attribute ids.
        let attribute = |attribute| unsafe { result::device::get_attribute(device, attribute) };
        devices.push(DeviceInfo {
            ordinal: ordinal as usize,
            name: result::device::get_name(device).map_err(query)?,
            compute_capability: (
                attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                    .map_err(query)?,
                attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                    .map_err(query)?,
            ),
            sms: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(query)? as u32,
            // SAFETY: a valid device handle.
            memory_bytes: unsafe { result::device::total_mem(device) }.map_err(query)? as u64,
        });
    }
    let mut code = 0;
    // SAFETY: a valid out-pointer.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut code) }
        .result()
        .map_err(|error| HwError::cuda("cuDriverGetVersion", error))?;
    Ok(DeviceReport {
        devices,
        driver: std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|text| driver_release(&text)),
        driver_cuda: cuda_version_string(code),
        bindings_cuda: "13.0",
        nccl: crate::nccl::version()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_driver_release_parse() {
        assert_eq!(cuda_version_string(13000), "13.0");
        assert_eq!(cuda_version_string(12040), "12.4");
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Oct 28 2025\nGCC version: gcc\n";
        assert_eq!(driver_release(text).as_deref(), Some("580.159.04"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Oct 30 2025\n";
        assert_eq!(driver_release(open).as_deref(), Some("580.159.04"));
        assert_eq!(driver_release("garbage"), None);
        // A word of digits without a dot, or with an empty part, is not the release.
        let odd = "NVRM version: NVIDIA UNIX Kernel Module 2 1. 3..4 .5 580.159.04 Release\n";
        assert_eq!(driver_release(odd).as_deref(), Some("580.159.04"));
        let letters = "NVRM version: NVIDIA UNIX Kernel Module v580.1 580.159.04\n";
        assert_eq!(driver_release(letters).as_deref(), Some("580.159.04"));
        // Only the first line is the driver's: a version on another is the compiler's.
        let no_release = "NVRM version: NVIDIA UNIX Kernel Module\nGCC version: gcc 12.2.0\n";
        assert_eq!(driver_release(no_release), None);
    }

    #[test]
    fn no_device_or_a_negative_count_is_no_usable_gpu() {
        assert_eq!(device_count(2).unwrap(), 2);
        for reported in [0, -1] {
            let error = device_count(reported).unwrap_err();
            assert_eq!(error.exit_code(), 2);
            assert_eq!(
                error.to_string(),
                format!("no usable NVIDIA GPU: the driver reports {reported} CUDA devices")
            );
        }
    }

    #[test]
    fn machine_map_has_versions_and_no_host_name() {
        let report = DeviceReport {
            devices: vec![DeviceInfo {
                ordinal: 0,
                name: "NVIDIA H200".into(),
                compute_capability: (9, 0),
                sms: 132,
                memory_bytes: 150_000_000_000,
            }],
            driver: Some("580.159.04".into()),
            driver_cuda: "13.0".into(),
            bindings_cuda: "13.0",
            nccl: "2.28.9".into(),
        };
        let machine = report.machine(0);
        assert_eq!(machine["device"], "NVIDIA H200");
        assert_eq!(machine["nccl"], "2.28.9");
        assert_eq!(machine["compute_capability"], "9.0");
        assert!(!machine.keys().any(|k| k.contains("host")));
    }

    /// On a machine without the CUDA driver this must be an error naming the library, never a
    /// panic; on a GPU machine it lists the GPUs.
    #[test]
    fn probe_never_panics() {
        use std::io::Write;
        match probe() {
            Ok(report) => {
                eprintln!("probe: {report:?}");
                assert!(!report.devices.is_empty());
            }
            Err(error) => {
                // Outside the harness's capture, so that the skip is visible.
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED the GPU checks of probe: {error}"
                );
                assert_eq!(error.exit_code(), 2);
            }
        }
    }
}
