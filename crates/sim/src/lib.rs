pub mod apps;
pub mod des;
pub mod measure;
pub mod net;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod wire;
