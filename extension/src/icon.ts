import { LabIcon } from '@jupyterlab/ui-components';

import xbenchSvg from '../style/icons/xbench.svg';

export const xbenchIcon = new LabIcon({ name: 'xbench:icon', svgstr: xbenchSvg });
