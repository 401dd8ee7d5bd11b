// Fields that complete names the server knows: roles, users, namespaces.
// Each fetches as the user types (debounced) and keeps working as a plain field
// when the lookup fails.
import { AutoComplete, Input, Select } from 'antd';
import { useState } from 'react';
import { call, type Namespace } from '../api';
import { useDebounced, useResource } from '../hooks';

interface FieldProps {
  /** Set by a Form.Item: its label's `for`, so the field is named by the label. */
  id?: string;
  value?: string;
  onChange?(v: string): void;
  placeholder?: string;
  testid: string;
}

/** The names `path` answers for `param` containing the typed text. */
function useNames(path: string, param: string, typed: string): string[] {
  const q = useDebounced(typed.trim(), 200);
  const res = useResource(() => call<string[]>('GET', path, { [param]: q }), [q]);
  return Array.isArray(res.data) ? res.data : [];
}

/** A role name, typed (a new role) or picked among the roles users hold. */
export function RoleInput({ id, value, onChange, placeholder, testid }: FieldProps) {
  const roles = useNames('/nacos/v1/auth/roles/search', 'role', value ?? '');
  return (
    <AutoComplete
      id={id}
      value={value}
      onChange={onChange}
      options={roles.map((r) => ({ value: r, label: <span data-testid={`${testid}-option-${r}`}>{r}</span> }))}
    >
      <Input className="mono" autoComplete="off" spellCheck={false} placeholder={placeholder} data-testid={testid} />
    </AutoComplete>
  );
}

/** An existing user, found by part of the name. */
export function UserPicker({ id, value, onChange, placeholder, testid }: FieldProps) {
  const [typed, setTyped] = useState('');
  const users = useNames('/nacos/v1/auth/users/search', 'username', typed);
  return (
    <Select
      id={id}
      value={value}
      onChange={onChange}
      showSearch
      filterOption={false}
      onSearch={setTyped}
      placeholder={placeholder}
      data-testid={testid}
      options={users.map((u) => ({ value: u, label: <span data-testid={`${testid}-option-${u}`}>{u}</span> }))}
    />
  );
}

/** A user name to filter by: any text, completed from the users that exist now. */
export function UserFilter({ id, value, onChange, placeholder, testid }: FieldProps) {
  const users = useNames('/nacos/v1/auth/users/search', 'username', value ?? '');
  return (
    <AutoComplete
      id={id}
      value={value}
      onChange={onChange}
      allowClear
      style={{ width: 200 }}
      options={users.map((u) => ({ value: u }))}
    >
      <Input autoComplete="off" placeholder={placeholder} data-testid={testid} />
    </AutoComplete>
  );
}

/** The options of a namespace select: the name, and the id when it differs. */
export function namespaceOptions(list: Namespace[], testid: string) {
  return list.map((n) => ({
    value: n.namespace,
    search: `${n.namespaceShowName} ${n.namespace}`,
    label: (
      <span className="ns-option" data-testid={`${testid}-option-${n.namespace}`}>
        <span>{n.namespaceShowName}</span>
        {n.namespaceShowName !== n.namespace && <span className="ns-option-id">{n.namespace}</span>}
      </span>
    ),
  }));
}
