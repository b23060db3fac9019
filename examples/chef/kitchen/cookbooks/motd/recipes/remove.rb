# Removes the greeting file when the stack is deleted (the hook sets deploy_action in the environment).
return unless ENV['deploy_action'] == 'DELETE'

file "#{node['workdir']}/motd" do
  action :delete
end
