// The parts of AG Grid Community the web UI uses, and nothing else: esbuild tree-shakes the
// rest away. `make ui-vendor` bundles this file into src/playline/web/static/vendor/.
export {
  CellStyleModule,
  ColumnApiModule,
  createGrid,
  EventApiModule,
  InfiniteRowModelModule,
  ModuleRegistry,
  RenderApiModule,
  RowApiModule,
  RowStyleModule,
  ScrollApiModule,
  themeQuartz,
  TooltipModule,
} from "ag-grid-community";
