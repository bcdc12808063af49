//! Types shared by every draftsmith stage and free of burn: draft trees (and later recipes,
//! manifests and metric definitions).

/// `FromStr` and `Display` for a fieldless enum of setting values (command-line flags, recipe
/// keys) from one table of names: `value_names!(Type, "what", { Variant => "name" | "alias", … })`.
/// `Display` writes each variant's first name; `FromStr` reads any of its names, and refuses
/// others with "unknown what `x` (name, name, …)" listing the first names.
#[macro_export]
macro_rules! value_names {
    ($ty:ty, $what:literal, { $first:ident => $fname:literal $(| $falias:literal)* $(, $variant:ident => $name:literal $(| $alias:literal)*)* $(,)? }) => {
        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $fname $(| $falias)* => Ok(Self::$first),
                    $($name $(| $alias)* => Ok(Self::$variant),)*
                    other => Err(format!(concat!("unknown ", $what, " `{}` (", $fname, $(", ", $name,)* ")"), other)),
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    Self::$first => $fname,
                    $(Self::$variant => $name,)*
                })
            }
        }
    };
}

pub mod beams;
pub mod digest;
pub mod fsio;
pub mod jsondiff;
pub mod seq;
pub mod stamp;
pub mod tree;

pub use beams::{
    beam_search, dedup_prefix, pack_beams, top_k_log_probs, unpacked_len, BeamDrafter, BeamSearchConfig, Beams,
    PackedBeams,
};
pub use seq::common_prefix;
pub use tree::DraftTree;

#[cfg(test)]
mod tests {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Shade {
        Light,
        Dark,
    }
    crate::value_names!(Shade, "shade", { Light => "light" | "pale", Dark => "dark" });

    #[test]
    fn value_names_reads_every_name_and_writes_the_first() {
        assert_eq!(
            ("light".parse(), "pale".parse(), "dark".parse()),
            (Ok(Shade::Light), Ok(Shade::Light), Ok(Shade::Dark))
        );
        assert_eq!((Shade::Light.to_string(), Shade::Dark.to_string()), ("light".into(), "dark".into()));
        assert_eq!("grey".parse::<Shade>().unwrap_err(), "unknown shade `grey` (light, dark)");
    }
}
