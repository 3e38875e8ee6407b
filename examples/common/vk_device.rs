//! The raw Vulkan setup the driver-level examples share: a Vulkan instance and its
//! physical device (the first discrete GPU, else the first device), whose name is printed.

use ash::vk;

/// # Safety
/// Calls into the Vulkan loader; the returned handles outlive nothing they depend on.
pub unsafe fn pick(api_version: u32) -> (ash::Entry, ash::Instance, vk::PhysicalDevice) {
    unsafe {
        let entry = ash::Entry::load().expect("libvulkan");
        let app = vk::ApplicationInfo::default().api_version(api_version);
        let instance = entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None).expect("instance");
        let pds = instance.enumerate_physical_devices().expect("devices");
        let pd = *pds
            .iter()
            .find(|&&p| instance.get_physical_device_properties(p).device_type == vk::PhysicalDeviceType::DISCRETE_GPU)
            .unwrap_or(&pds[0]);
        let props = instance.get_physical_device_properties(pd);
        println!("device: {:?}", props.device_name_as_c_str().unwrap_or_default());
        (entry, instance, pd)
    }
}
