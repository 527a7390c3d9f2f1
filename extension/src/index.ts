import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { WidgetTracker } from '@jupyterlab/apputils';
import { IEditorServices } from '@jupyterlab/codeeditor';
import { EditorExtensionRegistry, IEditorExtensionRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker } from '@jupyterlab/notebook';
import { MainAreaWidget } from '@jupyterlab/apputils';

import { KernelBridge } from './bridge';
import { xbenchIcon } from './icon';
import { tensorOpHighlight } from './magic';
import { NotebookBridges, XbenchSidebar } from './sidebar';
import { createSourcesWidget, SourcesView } from './sources';

const OPEN_SOURCES = 'xbench:open-sources';

const sidebarPlugin: JupyterFrontEndPlugin<void> = {
  id: '@xbench/lab:sidebar',
  description: 'The xbench operators panel and the generated-source viewer.',
  autoStart: true,
  requires: [INotebookTracker, IEditorServices],
  optional: [ILabShell],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    editorServices: IEditorServices,
    labShell: ILabShell | null
  ) => {
    const bridges = new NotebookBridges(notebooks);
    const tracker = new WidgetTracker<MainAreaWidget<SourcesView>>({ namespace: 'xbench-sources' });

    const open = (bridge: KernelBridge, name: string) => {
      const existing = tracker.find(
        w => !w.isDisposed && w.content.bridge === bridge && w.content.operatorName === name
      );
      if (existing) {
        app.shell.activateById(existing.id);
        return;
      }
      const widget = createSourcesWidget(bridge, name, editorServices.factoryService.newDocumentEditor);
      void tracker.add(widget);
      app.shell.add(widget, 'main', { mode: 'split-right' });
      app.shell.activateById(widget.id);
    };

    app.commands.addCommand(OPEN_SOURCES, {
      label: args => `Show the generated sources of ${(args.name as string) ?? 'an operator'}`,
      icon: xbenchIcon,
      execute: args => {
        const bridge = bridges.current;
        if (bridge && typeof args.name === 'string') {
          open(bridge, args.name);
        }
      }
    });

    const sidebar = new XbenchSidebar(bridges, (bridge, name) => open(bridge, name));
    if (labShell) {
      labShell.add(sidebar, 'right', { rank: 900 });
    } else {
      app.shell.add(sidebar, 'right');
    }
  }
};

const highlightPlugin: JupyterFrontEndPlugin<void> = {
  id: '@xbench/lab:tensorop-highlight',
  description: 'Marks the %%tensorop line of notebook cells.',
  autoStart: true,
  requires: [IEditorExtensionRegistry],
  activate: (app: JupyterFrontEnd, extensions: IEditorExtensionRegistry) => {
    extensions.addExtension({
      name: 'xbench:tensorop',
      // Cells and consoles are inline editors; files opened in the editor are left alone.
      factory: options =>
        options.inline ? EditorExtensionRegistry.createImmutableExtension(tensorOpHighlight()) : null
    });
  }
};

export default [sidebarPlugin, highlightPlugin];
