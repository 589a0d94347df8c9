package manifest

// Labels the catalog's transformers stamp on every rendered object (the
// identity and environment designs). The engine reads them back to find a
// release's objects without its inventory and to tell its own objects from
// anyone else's.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByOPM       = "open-platform-model"
	LabelReleaseName   = "module-release.opmodel.dev/name"
	LabelReleaseUUID   = "module-release.opmodel.dev/uuid"
	LabelModuleUUID    = "module.opmodel.dev/uuid"
	LabelComponentName = "component.opmodel.dev/name"
	LabelEnvironment   = "environment.opmodel.dev/name"
)
